package onscreen

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/otiai10/gosseract/v2"

	"github.com/verifierd/verifierd/sdk"
)

// TessdataPaths are where the adapter looks for Tesseract's English model
// (Debian's tesseract-ocr-eng). The adapter runs with an empty environment,
// so TESSDATA_PREFIX is never set and the library's own default is used;
// these paths only let Configure say what is missing.
var TessdataPaths = []string{
	"/usr/share/tesseract-ocr/5/tessdata/eng.traineddata",
	"/usr/share/tesseract-ocr/4.00/tessdata/eng.traineddata",
	"/usr/share/tessdata/eng.traineddata",
}

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

// fill puts what OCR read for each field (readings[i] is fields[i]'s
// region) into rec, as the field's value, and into raw, as read. A region
// with no text, or read below minConfidence, makes the read unusable:
// every marked field must read back.
func fill(fields []field, readings []reading, minConfidence float64, rec sdk.Record, raw map[string]string) error {
	for i, f := range fields {
		rd := readings[i]
		switch {
		case rd.text == "":
			return unusable("field %s: OCR found no text in its region; every marked field must read back", f.param)
		case rd.confidence < minConfidence:
			return unusable("field %s: OCR read its region with confidence %.0f, below ocr_min_confidence %.0f", f.param, rd.confidence, minConfidence)
		}
		raw[f.param] = rd.text
		rec[f.param] = valueOf(f, rd.text)
	}
	return nil
}

// modelPath finds Tesseract's English model.
func modelPath() (string, error) {
	for _, p := range TessdataPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("onscreen: no Tesseract English model found (looked for %s); install Debian's tesseract-ocr and tesseract-ocr-eng", strings.Join(TessdataPaths, ", "))
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
			v := greyAt(src, x, y)
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

// engine is the process's one Tesseract, kept warm between reads: the model
// loads once, and each read costs only the recognition (tens of
// milliseconds where starting the tesseract command costs hundreds;
// BENCHMARKS.md has the measurements behind this choice). Tesseract's API is
// not safe for concurrent use, so reads take turns.
var engine struct {
	mu     sync.Mutex
	client *gosseract.Client
}

// recognize runs Tesseract once over all the regions of one read, stacked
// into one image, and returns what it saw in each.
func recognize(ctx context.Context, regions []*image.Gray) ([]reading, error) {
	img, bands := composite(regions)
	var in bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&in, img); err != nil {
		return nil, err
	}
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if engine.client == nil {
		if _, err := modelPath(); err != nil {
			return nil, err
		}
		c := gosseract.NewClient()
		if err := c.SetLanguage("eng"); err != nil {
			c.Close()
			return nil, fmt.Errorf("onscreen: Tesseract: %w", err)
		}
		// One block of text lines: the regions, one per line band.
		if err := c.SetPageSegMode(gosseract.PSM_SINGLE_BLOCK); err != nil {
			c.Close()
			return nil, fmt.Errorf("onscreen: Tesseract: %w", err)
		}
		engine.client = c
	}
	if err := engine.client.SetImageFromBytes(in.Bytes()); err != nil {
		return nil, fmt.Errorf("onscreen: Tesseract: %w", err)
	}
	boxes, err := engine.client.GetBoundingBoxes(gosseract.RIL_WORD)
	if err != nil {
		return nil, fmt.Errorf("onscreen: Tesseract: %w", err)
	}
	return assign(boxes, bands), nil
}

type word struct {
	left int
	text string
	conf float64
}

// assign gives each recognised word to the band its centre lies in and
// joins each band's words left to right; a band's confidence is its least
// confident word's.
func assign(boxes []gosseract.BoundingBox, bands [][2]int) []reading {
	words := make([][]word, len(bands))
	for _, b := range boxes {
		text := strings.TrimSpace(b.Word)
		if text == "" {
			continue
		}
		mid := (b.Box.Min.Y + b.Box.Max.Y) / 2
		for i, band := range bands {
			if mid >= band[0] && mid < band[1] {
				words[i] = append(words[i], word{left: b.Box.Min.X, text: text, conf: b.Confidence})
				break
			}
		}
	}
	out := make([]reading, len(bands))
	for i, ws := range words {
		slices.SortStableFunc(ws, func(a, b word) int { return cmp.Compare(a.left, b.left) })
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
	return out
}

// greyAt is the grey level of one pixel (color.GrayModel always converts to
// color.Gray).
func greyAt(src image.Image, x, y int) uint8 {
	g, _ := color.GrayModel.Convert(src.At(x, y)).(color.Gray)
	return g.Y
}
