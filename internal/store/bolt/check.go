package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
)

// Why a checker of our own. bbolt trusts its file: a page id or an element
// offset read from a damaged page is followed through the memory map with
// no bounds check, so a corrupt store panics ("slice bounds out of range",
// "invalid freelist page") or faults on a page past the end of a truncated
// file (SIGBUS, which no recover can catch), and bbolt's own tx.Check runs
// in a goroutine of its own where the caller cannot recover. So before bbolt
// maps the file, walkFile reads it with plain pread calls, every offset
// bounds-checked: both meta pages (magic, version, checksum, as bbolt
// chooses between them), the high-water mark against the file size, the
// freelist, and every page reachable from the root bucket (page id in the
// header, flags, element offsets, key order, nested and inline buckets, no
// page reached twice or both used and free). Only a file that passes is
// handed to bbolt, which then also runs its own tx.Check; the store's
// transactions additionally recover a panic (and a fault, through
// debug.SetPanicOnFault) into an error, for damage that appears while the
// daemon runs. The format read here is bbolt's on-disk format (version 2,
// little-endian hosts).

const (
	pageHeaderSize  = 16
	elemSize        = 16
	flagBranch      = 0x01
	flagLeaf        = 0x02
	flagMeta        = 0x04
	flagFreelist    = 0x10
	bucketLeafFlag  = 0x01
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	noFreelist      = ^uint64(0)
	metaChecksumOff = 56 // bytes of the meta covered by its checksum
	maxProblems     = 50
)

// CorruptError says that the store file is damaged: which file, which page
// (Page < 0 when no single page is to blame) and what is wrong.
type CorruptError struct {
	Path    string
	Page    int64
	Problem string
	// Empty is set for a missing or 0-byte store in a data dir that held
	// sessions before: --init-store is then also a way out.
	Empty bool
}

func (e *CorruptError) Error() string {
	where := ""
	if e.Page >= 0 {
		where = fmt.Sprintf(" at page %d", e.Page)
	}
	dir := filepath.Dir(e.Path)
	hint := fmt.Sprintf("restore %s from a backup, or copy what is still readable into a fresh store with `verifierd store salvage --data-dir %s --out NEWDIR` (`verifierd store check --data-dir %s` lists the damage)",
		filepath.Base(e.Path), dir, dir)
	if e.Empty {
		hint = fmt.Sprintf("restore %s from a backup, or pass --init-store to start with an empty store (every earlier session then answers NotFound)", filepath.Base(e.Path))
	}
	return fmt.Sprintf("the store %s is corrupt%s: %s; %s", e.Path, where, e.Problem, hint)
}

// Report is what a check of the store file found.
type Report struct {
	Path      string
	PageSize  int
	HighWater uint64 // pages in use by the last transaction
	TxID      uint64
	Problems  []*CorruptError // empty when the file is sound
	Notes     []string        // harmless findings (a stale meta page bbolt recovers from)
}

// Err returns the first problem, or nil for a sound file.
func (r *Report) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return r.Problems[0]
}

func (r *Report) add(page int64, format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, &CorruptError{Path: r.Path, Page: page, Problem: fmt.Sprintf(format, args...)})
	}
}

type meta struct {
	pageSize       uint32
	root           uint64
	freelist, pgid uint64
	txid           uint64
	problem        string
}

// readMeta parses the meta page in buf (header included).
func readMeta(buf []byte) meta {
	var m meta
	if len(buf) < pageHeaderSize+metaChecksumOff+8 {
		m.problem = "short meta page"
		return m
	}
	b := buf[pageHeaderSize:]
	le := binary.LittleEndian
	m.pageSize = le.Uint32(b[8:])
	m.root = le.Uint64(b[16:])
	m.freelist = le.Uint64(b[32:])
	m.pgid = le.Uint64(b[40:])
	m.txid = le.Uint64(b[48:])
	h := fnv.New64a()
	h.Write(b[:metaChecksumOff])
	switch {
	case le.Uint32(b[0:]) != boltMagic:
		m.problem = "not a bbolt meta page (bad magic)"
	case le.Uint32(b[4:]) != boltVersion:
		m.problem = fmt.Sprintf("unknown bbolt version %d", le.Uint32(b[4:]))
	case le.Uint64(b[metaChecksumOff:]) != h.Sum64():
		m.problem = "meta checksum mismatch"
	case m.pageSize < 512 || m.pageSize > 1<<24 || m.pageSize&(m.pageSize-1) != 0:
		m.problem = fmt.Sprintf("implausible page size %d", m.pageSize)
	}
	return m
}

// walker reads a bbolt file page by page with every offset checked.
type walker struct {
	f       *os.File
	size    int64
	psize   int
	high    uint64
	rep     *Report
	used    []bool
	free    []bool
	salvage bool // keep going past damage, never failing on "reached twice"
}

// openFile checks the meta pages and sizes of f and returns a walker ready
// to read the tree of the meta bbolt would use, or nil when the file is
// unusable (the problem is in rep).
//
// In salvage mode a truncated file is read as far as it goes.
func openFile(f *os.File, rep *Report, salvage bool) (*walker, meta) {
	fi, err := f.Stat()
	if err != nil {
		rep.add(-1, "cannot stat the file: %v", err)
		return nil, meta{}
	}
	size := fi.Size()
	if size == 0 {
		rep.add(0, "the file is empty (0 bytes)")
		return nil, meta{}
	}
	first := make([]byte, 4096)
	n, _ := f.ReadAt(first, 0)
	m0 := readMeta(first[:n])
	psize := int(m0.pageSize)
	if m0.problem != "" {
		// Like bbolt: look for the second meta page at each possible page size.
		psize = 0
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			buf := make([]byte, 4096)
			k, _ := f.ReadAt(buf, pos)
			if m := readMeta(buf[:k]); m.problem == "" && int64(m.pageSize) == pos {
				psize = int(m.pageSize)
				break
			}
		}
	}
	if psize == 0 {
		rep.add(0, "both meta pages (0 and 1) are invalid: page 0: %s; no valid page 1 found", m0.problem)
		return nil, meta{}
	}
	rep.PageSize = psize
	metas := [2]meta{}
	for i := range metas {
		buf := make([]byte, psize)
		k, _ := f.ReadAt(buf, int64(i*psize))
		metas[i] = readMeta(buf[:k])
		if metas[i].problem == "" && binary.LittleEndian.Uint16(buf[8:]) != flagMeta {
			metas[i].problem = "meta page without the meta flag"
		}
		if metas[i].problem == "" && int(metas[i].pageSize) != psize {
			metas[i].problem = fmt.Sprintf("page size %d differs from the other meta page's %d", metas[i].pageSize, psize)
		}
	}
	// bbolt uses the meta page with the higher transaction id when it is
	// valid, else the other one.
	a, b := 0, 1
	if metas[1].txid > metas[0].txid {
		a, b = 1, 0
	}
	pick := -1
	switch {
	case metas[a].problem == "":
		pick = a
	case metas[b].problem == "":
		pick = b
	}
	if pick < 0 {
		rep.add(0, "both meta pages (0 and 1) are invalid: page 0: %s; page 1: %s", metas[0].problem, metas[1].problem)
		return nil, meta{}
	}
	if other := 1 - pick; metas[other].problem != "" {
		rep.Notes = append(rep.Notes, fmt.Sprintf("meta page %d is invalid (%s); bbolt uses page %d, whose tree is checked", other, metas[other].problem, pick))
	}
	m := metas[pick]
	rep.HighWater, rep.TxID = m.pgid, m.txid
	if m.pgid < 2 || m.pgid > uint64(1<<62)/uint64(psize) {
		rep.add(int64(pick), "implausible high-water mark %d in the meta page", m.pgid)
		return nil, meta{}
	}
	if need := int64(m.pgid) * int64(psize); size < need {
		rep.add(size/int64(psize), "the file is truncated: %d bytes, but the last transaction uses %d pages of %d bytes (%d bytes); page %d onwards is missing",
			size, m.pgid, psize, need, size/int64(psize))
		if !salvage {
			return nil, meta{}
		}
		m.pgid = uint64(size / int64(psize))
	}
	if m.root < 2 || m.root >= m.pgid {
		rep.add(int64(pick), "the root bucket's page %d is outside the file's pages 2..%d", m.root, m.pgid-1)
		return nil, meta{}
	}
	if m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid) {
		rep.add(int64(pick), "the freelist's page %d is outside the file's pages 2..%d", m.freelist, m.pgid-1)
		return nil, meta{}
	}
	w := &walker{f: f, size: size, psize: psize, high: m.pgid, rep: rep, used: make([]bool, m.pgid), free: make([]bool, m.pgid), salvage: salvage}
	w.used[0], w.used[1] = true, true
	return w, m
}

// page reads page id with its overflow pages and checks its header.
func (w *walker) page(id uint64) ([]byte, bool) {
	if id < 2 || id >= w.high {
		w.rep.add(int64(id), "a reference to page %d, outside the file's pages 2..%d", id, w.high-1)
		return nil, false
	}
	buf := make([]byte, w.psize)
	if _, err := w.f.ReadAt(buf, int64(id)*int64(w.psize)); err != nil {
		w.rep.add(int64(id), "unreadable: %v", err)
		return nil, false
	}
	le := binary.LittleEndian
	if got := le.Uint64(buf); got != id {
		w.rep.add(int64(id), "the page header names page %d", got)
		return nil, false
	}
	over := uint64(le.Uint32(buf[12:]))
	if id+over >= w.high {
		w.rep.add(int64(id), "%d overflow pages run past the last page %d", over, w.high-1)
		return nil, false
	}
	for i := id; i <= id+over; i++ {
		if w.used[i] || w.free[i] {
			if !w.salvage {
				w.rep.add(int64(i), "reached twice (a page shared by two parents, or in use and free)")
			}
			return nil, false
		}
	}
	for i := id; i <= id+over; i++ {
		w.used[i] = true
	}
	if over > 0 {
		buf = make([]byte, int(over+1)*w.psize)
		if _, err := w.f.ReadAt(buf, int64(id)*int64(w.psize)); err != nil {
			w.rep.add(int64(id), "unreadable: %v", err)
			return nil, false
		}
	}
	return buf, true
}

// freelist reads the freelist page and marks its pages free.
func (w *walker) freelist(id uint64) {
	buf, ok := w.page(id)
	if !ok {
		return
	}
	le := binary.LittleEndian
	if fl := le.Uint16(buf[8:]); fl != flagFreelist {
		w.rep.add(int64(id), "bad page flags 0x%x for the freelist page", fl)
		return
	}
	count, off := uint64(le.Uint16(buf[10:])), pageHeaderSize
	if count == 0xFFFF {
		count, off = le.Uint64(buf[pageHeaderSize:]), pageHeaderSize+8
	}
	if count > uint64(len(buf)-off)/8 {
		w.rep.add(int64(id), "the freelist claims %d pages, more than its page holds", count)
		return
	}
	for i := range count {
		p := le.Uint64(buf[off+int(i)*8:])
		switch {
		case p < 2 || p >= w.high:
			w.rep.add(int64(id), "the freelist names page %d, outside the file's pages 2..%d", p, w.high-1)
			return
		case w.free[p] || w.used[p]:
			w.rep.add(int64(p), "listed twice in the freelist, or free and in use")
			return
		}
		w.free[p] = true
	}
}

// elem is one element of a branch or leaf page.
type elem struct {
	key, val []byte
	child    uint64
	bucket   bool
}

// elems parses the elements of a page (or of an inline bucket's page) held
// in buf; page is the page id named in problems.
func (w *walker) elems(buf []byte, page int64) (flags uint16, out []elem, ok bool) {
	if len(buf) < pageHeaderSize {
		w.rep.add(page, "an inline bucket shorter than a page header")
		return 0, nil, false
	}
	le := binary.LittleEndian
	flags = le.Uint16(buf[8:])
	count := int(le.Uint16(buf[10:]))
	if flags != flagBranch && flags != flagLeaf {
		w.rep.add(page, "bad page flags 0x%x (want a branch 0x01 or leaf 0x02 page)", flags)
		return flags, nil, false
	}
	if pageHeaderSize+count*elemSize > len(buf) {
		w.rep.add(page, "%d elements do not fit in the page", count)
		return flags, nil, false
	}
	out = make([]elem, count)
	for i := range count {
		off := pageHeaderSize + i*elemSize
		e := buf[off : off+elemSize]
		var pos, ksize, vsize uint64
		if flags == flagBranch {
			pos, ksize = uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:]))
			out[i].child = le.Uint64(e[8:])
		} else {
			out[i].bucket = le.Uint32(e[0:])&bucketLeafFlag != 0
			pos, ksize, vsize = uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
		}
		start := uint64(off) + pos
		if start+ksize+vsize > uint64(len(buf)) {
			w.rep.add(page, "element %d points outside the page", i)
			return flags, nil, false
		}
		out[i].key = buf[start : start+ksize]
		out[i].val = buf[start+ksize : start+ksize+vsize]
		if i > 0 && bytes.Compare(out[i-1].key, out[i].key) >= 0 {
			w.rep.add(page, "keys out of order at element %d", i)
			return flags, nil, false
		}
	}
	return flags, out, true
}

// tree calls fn for every leaf element of the b+tree rooted at page root.
// It returns false when part of the tree could not be read (the damage is
// in the report); in salvage mode the readable rest is still visited.
func (w *walker) tree(root uint64, depth int, fn func(elem)) bool {
	if depth > 64 {
		w.rep.add(int64(root), "the tree is deeper than 64 levels")
		return false
	}
	buf, ok := w.page(root)
	if !ok {
		return false
	}
	return w.nodes(buf, int64(root), depth, fn)
}

func (w *walker) nodes(buf []byte, page int64, depth int, fn func(elem)) bool {
	flags, els, ok := w.elems(buf, page)
	if !ok {
		return false
	}
	whole := true
	for _, e := range els {
		if flags == flagBranch {
			if !w.tree(e.child, depth+1, fn) {
				whole = false
				if !w.salvage {
					return false
				}
			}
			continue
		}
		fn(e)
	}
	return whole
}

// bucket visits the elements of the bucket whose leaf value is v.
func (w *walker) bucket(v []byte, page int64, fn func(elem)) bool {
	if len(v) < 16 {
		w.rep.add(page, "a bucket value of %d bytes", len(v))
		return false
	}
	root := binary.LittleEndian.Uint64(v)
	if root == 0 {
		flags, els, ok := w.elems(v[16:], page)
		if !ok {
			return false
		}
		if flags != flagLeaf {
			w.rep.add(page, "an inline bucket that is not a leaf")
			return false
		}
		for _, e := range els {
			fn(e)
		}
		return true
	}
	return w.tree(root, 0, fn)
}

// checkAll walks every bucket below the root and then checks that every
// page is either in use or free.
func (w *walker) checkAll(m meta) {
	if m.freelist != noFreelist {
		w.freelist(m.freelist)
		if len(w.rep.Problems) > 0 {
			return
		}
	}
	var visit func(e elem, page int64)
	visit = func(e elem, page int64) {
		if !e.bucket || len(w.rep.Problems) > 0 {
			return
		}
		w.bucket(e.val, page, func(c elem) { visit(c, page) })
	}
	w.tree(m.root, 0, func(e elem) { visit(e, int64(m.root)) })
	if len(w.rep.Problems) > 0 || m.freelist == noFreelist {
		return
	}
	for i := uint64(2); i < w.high; i++ {
		if !w.used[i] && !w.free[i] {
			w.rep.add(int64(i), "neither in use nor free (a lost page)")
			return
		}
	}
}

// checkFile runs the whole structural check over f.
func checkFile(f *os.File, path string) *Report {
	rep := &Report{Path: path}
	w, m := openFile(f, rep, false)
	if w != nil {
		w.checkAll(m)
	}
	return rep
}

// fromBoltCheck turns one of bbolt's tx.Check messages into a problem,
// taking the page from a leading "page N".
func fromBoltCheck(path string, err error) *CorruptError {
	msg := err.Error()
	page := int64(-1)
	if rest, ok := strings.CutPrefix(msg, "page "); ok {
		if _, err := fmt.Sscanf(rest, "%d", &page); err != nil {
			page = -1
		}
	}
	return &CorruptError{Path: path, Page: page, Problem: "bbolt's consistency check: " + msg}
}
