// CaptureSender: see docs/DESIGN.md
