package onscreen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// TesseractPaths are where the adapter looks for Tesseract (Debian's
// tesseract-ocr puts it in /usr/bin). The adapter runs with an empty
// environment, so there is no PATH to search.
var TesseractPaths = []string{"/usr/bin/tesseract", "/usr/local/bin/tesseract"}

// ocrScale is how much larger than on screen a region is rendered before
// OCR: Chromium paints it at this device scale, so the text is drawn
// sharper rather than its pixels enlarged afterwards. On the tests' pages
// (24 px text in three fonts) 2 read 99.4 % of fields exactly and 3 read
// 95.6 %: at 3 the text is larger than Tesseract's model expects.
const ocrScale = 2

// gap is the white space, in pixels of the composite, between two regions
// and around them, so that Tesseract sees each region as its own line.
const gap = 40

// reading is what OCR saw in one region.
type reading struct {
	text       string
	confidence float64 // the lowest word confidence, 0 to 100; -1 with no word
}

// tesseractPath finds the binary.
func tesseractPath() (string, error) {
	for _, p := range TesseractPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("onscreen: no Tesseract found (looked for %s); install Debian's tesseract-ocr and tesseract-ocr-eng", strings.Join(TesseractPaths, ", "))
}

// binarize turns a rendered region into black text on white: grey, then a
// threshold chosen by Otsu's method, inverted when the text is light on a
// dark background. Screen text is clean, so one global threshold is enough.
func binarize(src image.Image) *image.Gray {
	b := src.Bounds()
	g := image.NewGray(image.Rect(0, 0, b.Dx(), b.Dy()))
	var hist [256]int
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			v := color.GrayModel.Convert(src.At(x, y)).(color.Gray).Y
			g.Pix[(y-b.Min.Y)*g.Stride+(x-b.Min.X)] = v
			hist[v]++
		}
	}
	t := otsu(hist, b.Dx()*b.Dy())
	dark := 0
	for i := range g.Pix {
		if g.Pix[i] <= t {
			dark++
		}
	}
	invert := dark*2 > len(g.Pix) // mostly dark: light text on a dark ground
	for i, v := range g.Pix {
		black := v <= t
		if invert {
			black = !black
		}
		if black {
			g.Pix[i] = 0
		} else {
			g.Pix[i] = 255
		}
	}
	return g
}

func otsu(hist [256]int, total int) uint8 {
	if total == 0 {
		return 127
	}
	var sum float64
	for i, n := range hist {
		sum += float64(i * n)
	}
	var sumB, best float64
	var wB int
	threshold := 127
	for i, n := range hist {
		wB += n
		if wB == 0 {
			continue
		}
		wF := total - wB
		if wF == 0 {
			break
		}
		sumB += float64(i * n)
		mB := sumB / float64(wB)
		mF := (sum - sumB) / float64(wF)
		between := float64(wB) * float64(wF) * (mB - mF) * (mB - mF)
		if between > best {
			best, threshold = between, i
		}
	}
	return uint8(threshold)
}

// composite stacks the regions one under the other on white, with a gap
// between them, and returns the vertical band each one occupies.
func composite(regions []*image.Gray) (*image.Gray, [][2]int) {
	w, h := 0, gap
	for _, r := range regions {
		w = max(w, r.Bounds().Dx())
		h += r.Bounds().Dy() + gap
	}
	out := image.NewGray(image.Rect(0, 0, w+2*gap, h))
	for i := range out.Pix {
		out.Pix[i] = 255
	}
	bands := make([][2]int, len(regions))
	y := gap
	for i, r := range regions {
		rb := r.Bounds()
		draw.Draw(out, image.Rect(gap, y, gap+rb.Dx(), y+rb.Dy()), r, rb.Min, draw.Src)
		bands[i] = [2]int{y - gap/2, y + rb.Dy() + gap/2}
		y += rb.Dy() + gap
	}
	return out, bands
}

// recognize runs Tesseract once over all the regions of one read and
// returns what it saw in each. One process per read keeps the cost of
// starting the engine to one start per read-back, whatever the number of
// fields (BENCHMARKS.md has the measurements behind this choice).
func recognize(ctx context.Context, regions []*image.Gray) ([]reading, error) {
	path, err := tesseractPath()
	if err != nil {
		return nil, err
	}
	img, bands := composite(regions)
	var in bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&in, img); err != nil {
		return nil, err
	}
	// --psm 6: one block of text lines; the TSV gives each word's box and
	// confidence. One OpenMP thread: the machine is shared, and threads
	// cost more than they give on a few lines of text.
	cmd := exec.CommandContext(ctx, path, "stdin", "stdout", "--psm", "6", "-l", "eng", "tsv")
	cmd.Env = []string{"OMP_THREAD_LIMIT=1"}
	cmd.Stdin = &in
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("tesseract failed: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return parseTSV(out.Bytes(), bands)
}

type word struct {
	left int
	text string
	conf float64
}

// parseTSV assigns each recognised word to the band its centre lies in and
// joins each band's words left to right.
func parseTSV(tsv []byte, bands [][2]int) ([]reading, error) {
	words := make([][]word, len(bands))
	sc := bufio.NewScanner(bytes.NewReader(tsv))
	header := true
	for sc.Scan() {
		if header {
			header = false
			continue
		}
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 12 || cols[0] != "5" {
			continue
		}
		text := strings.TrimSpace(cols[11])
		if text == "" {
			continue
		}
		left, err1 := strconv.Atoi(cols[6])
		top, err2 := strconv.Atoi(cols[7])
		height, err3 := strconv.Atoi(cols[9])
		conf, err4 := strconv.ParseFloat(cols[10], 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, fmt.Errorf("tesseract's TSV output: %w", err)
		}
		mid := top + height/2
		for i, b := range bands {
			if mid >= b[0] && mid < b[1] {
				words[i] = append(words[i], word{left: left, text: text, conf: conf})
				break
			}
		}
	}
	out := make([]reading, len(bands))
	for i, ws := range words {
		sort.Slice(ws, func(a, b int) bool { return ws[a].left < ws[b].left })
		parts := make([]string, len(ws))
		low := -1.0
		for k, w := range ws {
			parts[k] = w.text
			if low < 0 || w.conf < low {
				low = w.conf
			}
		}
		out[i] = reading{text: strings.Join(parts, " "), confidence: low}
	}
	return out, nil
}
