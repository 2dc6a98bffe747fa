// CaptureReceiver: see docs/DESIGN.md
