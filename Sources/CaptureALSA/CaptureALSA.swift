// CaptureALSA: see docs/DESIGN.md
