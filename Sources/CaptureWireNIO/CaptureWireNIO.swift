// CaptureWireNIO: see docs/DESIGN.md
