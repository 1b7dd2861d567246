// Package onscreen is the on-screen read-back adapter (kind `onscreen`):
// for an application with no API, database, export or separately
// signed-in record page, it reads the fields a person marked off the acting
// application's own screen — a Chromium the automation drives, reached over
// the DevTools protocol, or a local X display dumped with xwd — by OCR of a
// region (Tesseract) or, in Chromium, from the page structure (an element's
// displayed text, a form control's value), one record for the page or, with
// row_selector, one per row on screen.
//
// Its tier comes from the configured mechanism: with a re-navigation of two
// actions or more it re-opens the record in a new tab of the same browser,
// under the same read-only guards as ui_readback (tier 3, reacquired
// state); without one it reads the screen the save left, only when the
// section says same_surface: true (tier 4, screen consistency). Either way
// it is a consistency check, never a read of the system of record: absence
// there is not proof, and every CONFIRMED carries SCREEN_CONSISTENCY_ONLY.
// docs/adapters/onscreen.md says what each tier can and cannot catch.
package onscreen
