/// Draws a level as a horizontal bar of `cells` characters: full cells `▇`, one partial cell whose
/// height shows the remainder (`▁`…`▆`), and `-` for the rest. The scale is linear in dB from
/// `floorDBFS` (empty) to 0 dBFS (full). A held peak above the level shows as `|` in the cell where
/// it falls, as a peak-hold marker does on a hardware meter.
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
    /// The peak-hold marker.
    public static let holdMarker: Character = "|"

    /// The bar for a level in dBFS (`-infinity` for silence), with a marker for `heldDBFS` when
    /// that falls in a cell the level leaves empty.
    public func render(dBFS level: Double, heldDBFS: Double? = nil) -> String {
        guard cells > 0 else { return "" }
        let shown = fraction(level)
        var bar = render(fraction: shown)
        if let heldDBFS {
            let held = fraction(heldDBFS)
            let cell = min(cells - 1, Int(held * Double(cells)))
            let drawn = bar.filter { $0 != Self.empty }.count
            if held > shown, cell >= drawn {
                let index = bar.index(bar.startIndex, offsetBy: cell)
                bar.replaceSubrange(index...index, with: String(Self.holdMarker))
            }
        }
        return bar
    }

    /// Where `level` falls between the floor (0) and full scale (1).
    private func fraction(_ level: Double) -> Double {
        if level.isNaN || level <= floorDBFS { return 0 }
        return min(1, (level - floorDBFS) / -floorDBFS)
    }

    private func render(fraction: Double) -> String {
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
