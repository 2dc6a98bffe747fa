/// Draws a level as a horizontal bar of `cells` characters: full cells `▇`, one partial cell whose
/// height shows the remainder (`▁`…`▆`), and `-` for the rest. The scale is linear in dB from
/// `floorDBFS` (empty) to 0 dBFS (full).
public struct LevelBar: Sendable, Equatable {
    /// Characters in the bar.
    public var cells: Int
    /// The level shown as an empty bar; anything quieter is empty too.
    public var floorDBFS: Double

    public init(cells: Int, floorDBFS: Double = -60) {
        self.cells = max(0, cells)
        self.floorDBFS = min(-1, floorDBFS)
    }

    private static let full: Character = "▇"
    private static let partials: [Character] = ["▁", "▂", "▃", "▄", "▅", "▆"]
    private static let empty: Character = "-"

    /// The bar for a level in dBFS (`-infinity` for silence).
    public func render(dBFS level: Double) -> String {
        guard cells > 0 else { return "" }
        let fraction: Double
        if level.isNaN || level <= floorDBFS {
            fraction = 0
        } else {
            fraction = min(1, (level - floorDBFS) / -floorDBFS)
        }
        let filled = fraction * Double(cells)
        let fullCells = min(cells, Int(filled))
        var bar = String(repeating: Self.full, count: fullCells)
        if fullCells < cells {
            // Sevenths of a cell: 0 draws nothing, 1...6 a partial block, 7 rounds up to a full one.
            let sevenths = Int(((filled - Double(fullCells)) * 7).rounded())
            if sevenths >= 7 {
                bar.append(Self.full)
            } else if sevenths >= 1 {
                bar.append(Self.partials[sevenths - 1])
            }
        }
        bar += String(repeating: Self.empty, count: cells - bar.count)
        return bar
    }
}
