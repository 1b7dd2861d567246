package onscreen

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"os"
	"os/exec"
	"strings"

	"github.com/verifierd/verifierd/sdk"
)

// XwdPaths are where the adapter looks for xwd (Debian's x11-apps), which
// dumps an X display's root window for the display source.
var XwdPaths = []string{"/usr/bin/xwd"}

func xwdPath() (string, error) {
	for _, p := range XwdPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("onscreen: no xwd found (looked for %s); install Debian's x11-apps for screen.display", strings.Join(XwdPaths, ", "))
}

// readDisplay reads the marked fields off an X display: one dump of the
// root window, each region cut out of it, enlarged and read by OCR. A
// display has no page structure, so a selector field makes the read
// unusable rather than falling back to OCR; and it cannot be re-navigated,
// so only the screen the save left is read (tier 4).
func readDisplay(ctx context.Context, s *settings) (result, error) {
	for _, f := range s.fields {
		if f.region == nil {
			return result{}, unusable("field %s: an X display has no page structure to read a selector from; mark the field with a region", f.param)
		}
	}
	xwd, err := xwdPath()
	if err != nil {
		return result{}, err
	}
	cmd := exec.CommandContext(ctx, xwd, "-root", "-silent", "-display", s.display)
	cmd.Env = []string{} // the display is named on the command line
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return result{}, unusable("the read-back's deadline passed while capturing the display")
		}
		return result{}, unusable("could not capture the X display %s: %s", s.display, strings.TrimSpace(stderr.String()))
	}
	screen, err := decodeXWD(out.Bytes())
	if err != nil {
		return result{}, unusable("the capture of the X display %s: %v", s.display, err)
	}
	rec := sdk.Record{"id": "display" + s.display}
	raw := map[string]string{}
	regions := make([]*image.Gray, len(s.fields))
	b := screen.Bounds()
	for i, f := range s.fields {
		r := f.region
		cut := image.Rect(r[0], r[1], r[0]+r[2], r[1]+r[3])
		if !cut.In(b) {
			return result{}, unusable("field %s: its region lies outside the display (%dx%d)", f.param, b.Dx(), b.Dy())
		}
		regions[i] = binarize(enlarge(screen.SubImage(cut), ocrScale))
	}
	readings, err := recognize(ctx, regions)
	if err != nil {
		return result{}, err
	}
	if err := fill(s.fields, readings, s.minConfidence, rec, raw); err != nil {
		return result{}, err
	}
	return result{records: []sdk.Record{rec}, raw: raw}, nil
}

// reachDisplay is the preflight of the display source: one dump.
func reachDisplay(ctx context.Context, s *settings) error {
	xwd, err := xwdPath()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, xwd, "-root", "-silent", "-display", s.display)
	cmd.Env = []string{}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return unusable("could not capture the X display %s: %s", s.display, strings.TrimSpace(stderr.String()))
	}
	if _, err := decodeXWD(out.Bytes()); err != nil {
		return unusable("the capture of the X display %s: %v", s.display, err)
	}
	return nil
}

// enlarge scales src by k with bilinear interpolation: a display dump has
// screen-sized text, smaller than Tesseract reads best.
func enlarge(src image.Image, k int) *image.Gray {
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	grey := make([]float64, w*h)
	for y := range h {
		for x := range w {
			grey[y*w+x] = float64(greyAt(src, b.Min.X+x, b.Min.Y+y))
		}
	}
	out := image.NewGray(image.Rect(0, 0, w*k, h*k))
	at := func(x, y int) float64 {
		x, y = min(max(x, 0), w-1), min(max(y, 0), h-1)
		return grey[y*w+x]
	}
	for y := 0; y < h*k; y++ {
		fy := (float64(y)+0.5)/float64(k) - 0.5
		y0 := int(fy)
		if fy < 0 {
			y0 = -1
		}
		dy := fy - float64(y0)
		for x := 0; x < w*k; x++ {
			fx := (float64(x)+0.5)/float64(k) - 0.5
			x0 := int(fx)
			if fx < 0 {
				x0 = -1
			}
			dx := fx - float64(x0)
			v := at(x0, y0)*(1-dx)*(1-dy) + at(x0+1, y0)*dx*(1-dy) + at(x0, y0+1)*(1-dx)*dy + at(x0+1, y0+1)*dx*dy
			out.Pix[y*out.Stride+x] = uint8(v + 0.5)
		}
	}
	return out
}

// xwdHeader is the fixed part of an X window dump (X11 XWD version 7),
// big-endian 32-bit fields.
type xwdHeader struct {
	HeaderSize, FileVersion, PixmapFormat, PixmapDepth, PixmapWidth, PixmapHeight  uint32
	XOffset, ByteOrder, BitmapUnit, BitmapBitOrder, BitmapPad, BitsPerPixel        uint32
	BytesPerLine, VisualClass, RedMask, GreenMask, BlueMask, BitsPerRGB, ColormapN uint32
	NColors, WindowWidth, WindowHeight, WindowX, WindowY, WindowBorderWidth        uint32
}

// decodeXWD decodes the dumps xwd makes of a true-colour display: ZPixmap,
// 24 or 32 bits per pixel, with red, green and blue masks. Anything else is
// refused rather than guessed.
func decodeXWD(data []byte) (*image.RGBA, error) {
	var h xwdHeader
	if err := binary.Read(bytes.NewReader(data), binary.BigEndian, &h); err != nil {
		return nil, errors.New("not an X window dump")
	}
	const zPixmap, trueColor, directColor = 2, 4, 5
	switch {
	case h.FileVersion != 7:
		return nil, fmt.Errorf("the X window dump has version %d; want 7", h.FileVersion)
	case h.PixmapFormat != zPixmap:
		return nil, fmt.Errorf("the X window dump has pixmap format %d; want ZPixmap", h.PixmapFormat)
	case h.VisualClass != trueColor && h.VisualClass != directColor:
		return nil, fmt.Errorf("the display is not true colour (visual class %d)", h.VisualClass)
	case h.BitsPerPixel != 24 && h.BitsPerPixel != 32:
		return nil, fmt.Errorf("%d bits per pixel; want 24 or 32", h.BitsPerPixel)
	case h.PixmapWidth == 0 || h.PixmapHeight == 0 || h.PixmapWidth > 16384 || h.PixmapHeight > 16384:
		return nil, fmt.Errorf("an image of %dx%d", h.PixmapWidth, h.PixmapHeight)
	}
	start := uint64(h.HeaderSize) + uint64(h.NColors)*12
	w, ht, stride := int(h.PixmapWidth), int(h.PixmapHeight), uint64(h.BytesPerLine)
	bpp := int(h.BitsPerPixel / 8)
	if stride < uint64(w*bpp) || start+stride*uint64(ht) > uint64(len(data)) {
		return nil, errors.New("the X window dump is cut short")
	}
	shift := func(mask uint32) (uint, uint32) {
		if mask == 0 {
			return 0, 0
		}
		s := uint(0)
		for mask&1 == 0 {
			mask >>= 1
			s++
		}
		return s, mask
	}
	rs, rm := shift(h.RedMask)
	gs, gm := shift(h.GreenMask)
	bs, bm := shift(h.BlueMask)
	if rm == 0 || gm == 0 || bm == 0 {
		return nil, errors.New("the X window dump has no colour masks")
	}
	scale := func(v, m uint32) uint8 { return uint8(v * 255 / m) }
	img := image.NewRGBA(image.Rect(0, 0, w, ht))
	for y := range ht {
		row := data[start+uint64(y)*stride:]
		for x := range w {
			p := row[x*bpp : x*bpp+bpp]
			var v uint32
			if h.ByteOrder == 0 { // LSBFirst
				for i := bpp - 1; i >= 0; i-- {
					v = v<<8 | uint32(p[i])
				}
			} else {
				for i := range bpp {
					v = v<<8 | uint32(p[i])
				}
			}
			o := img.PixOffset(x, y)
			img.Pix[o] = scale(v>>rs&rm, rm)
			img.Pix[o+1] = scale(v>>gs&gm, gm)
			img.Pix[o+2] = scale(v>>bs&bm, bm)
			img.Pix[o+3] = 255
		}
	}
	return img, nil
}
