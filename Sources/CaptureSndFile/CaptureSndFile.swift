// CaptureSndFile: see docs/DESIGN.md
