// CAF: see docs/DESIGN.md
