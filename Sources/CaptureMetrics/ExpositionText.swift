/// Tidies the registry's Prometheus text: families in name order (the registry's order is a
/// dictionary's), and a `# HELP` line before each `# TYPE` line that has a known help text.
enum ExpositionText {
    static func sortedWithHelp(_ text: String, helpTexts: [String: String]) -> String {
        var families: [(name: String, lines: [Substring])] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# TYPE ") {
                let name = line.dropFirst("# TYPE ".count).split(separator: " ").first.map(String.init) ?? ""
                families.append((name, [line]))
            } else if line.hasPrefix("# HELP ") {
                continue
            } else if families.isEmpty {
                families.append(("", [line]))
            } else {
                families[families.count - 1].lines.append(line)
            }
        }
        var output = ""
        for family in families.sorted(by: { $0.name < $1.name }) {
            if let help = helpTexts[family.name] {
                output += "# HELP \(family.name) \(help)\n"
            }
            // Series within a family in label order, so scrapes compare line by line.
            let type = family.lines.first.map { [$0] } ?? []
            let series = family.lines.dropFirst()
            for line in type { output += line + "\n" }
            for line in (family.name.isEmpty ? Array(series) : seriesSorted(series)) { output += line + "\n" }
        }
        return output
    }

    /// Histogram series keep their bucket order; other series sort by their label set.
    private static func seriesSorted(_ lines: ArraySlice<Substring>) -> [Substring] {
        if lines.contains(where: { $0.contains("_bucket{") }) { return Array(lines) }
        return lines.sorted()
    }

    /// A label value escaped as the exposition format writes it.
    static func escapedLabelValue(_ value: String) -> String {
        var escaped = ""
        for character in value {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
