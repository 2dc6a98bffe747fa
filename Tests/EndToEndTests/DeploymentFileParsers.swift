import Foundation

/// Reads command lines out of the deployment files. Small line parsers for the shapes these files
/// use (no YAML library): compose `command: [...]` flow sequences, Dockerfile exec-form `CMD` and
/// `RUN` lines, shell blocks in Markdown, `KEY=value` environment files.
enum DeploymentFiles {
    /// Each compose service's `command:`, by service name. Commands must be JSON-style flow
    /// sequences of double-quoted strings on one line.
    static func composeCommands(_ yaml: String) throws -> [String: [String]] {
        var commands: [String: [String]] = [:]
        var inServices = false
        var service: String?
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("services:") { inServices = true; continue }
            if !line.hasPrefix(" "), !line.isEmpty, !line.hasPrefix("#") { inServices = false }
            guard inServices else { continue }
            let indent = line.prefix { $0 == " " }.count
            let content = line.trimmingCharacters(in: .whitespaces)
            if indent == 2, content.hasSuffix(":"), !content.hasPrefix("#") {
                service = String(content.dropLast())
            } else if indent == 4, content.hasPrefix("command:"), let service {
                commands[service] = try jsonStringArray(String(content.dropFirst("command:".count)))
            }
        }
        return commands
    }

    /// The Dockerfile's exec-form `CMD [...]` (the last one; HEALTHCHECK's CMD excluded).
    static func dockerfileCommand(_ dockerfile: String) throws -> [String]? {
        let lines = logicalLines(dockerfile)
        guard let line = lines.last(where: { $0.hasPrefix("CMD ") }) else { return nil }
        return try jsonStringArray(String(line.dropFirst("CMD ".count)))
    }

    /// The shell commands of every `RUN`, split at `&&`.
    static func dockerfileRunCommands(_ dockerfile: String) -> [String] {
        logicalLines(dockerfile).filter { $0.hasPrefix("RUN ") }.flatMap { line in
            line.dropFirst("RUN ".count).components(separatedBy: "&&").map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    /// The non-empty lines of the first ```sh block after the heading `heading`.
    static func firstShellBlock(after heading: String, in markdown: String) throws -> [String] {
        guard let headingRange = markdown.range(of: "\n\(heading)\n") else { throw TestFailure("no \(heading) section") }
        let rest = markdown[headingRange.upperBound...]
        guard let open = rest.range(of: "```sh\n"), let close = rest[open.upperBound...].range(of: "```") else {
            throw TestFailure("no shell block under \(heading)")
        }
        return rest[open.upperBound..<close.lowerBound].split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `KEY=value` lines of an environment file (comments and blank lines skipped).
    static func environmentFile(_ text: String) throws -> [String: String] {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) where !line.isEmpty && !line.hasPrefix("#") {
            guard let equals = line.firstIndex(of: "=") else { throw TestFailure("not KEY=value: \(line)") }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    /// Lines with backslash continuations joined and comments dropped.
    static func logicalLines(_ text: String) -> [String] {
        var lines: [String] = []
        var current = ""
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if current.isEmpty, line.hasPrefix("#") { continue }
            if line.hasSuffix("\\") {
                current += line.dropLast() + " "
            } else {
                current += line
                if !current.isEmpty { lines.append(current) }
                current = ""
            }
        }
        return lines
    }

    private static func jsonStringArray(_ text: String) throws -> [String] {
        guard let array = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String] else {
            throw TestFailure("not a list of strings: \(text)")
        }
        return array
    }
}

/// A systemd unit file: its `Key=value` settings, and `ExecStart=` split into words as systemd does
/// (quotes, `${VAR}` as one word, `$VAR` split at spaces, `%H` and `%%` specifiers).
struct SystemdUnit {
    private(set) var settings: [(key: String, value: String)] = []

    init(text: String) throws {
        for line in DeploymentFiles.logicalLines(text) where !line.hasPrefix(";") && !line.hasPrefix("[") {
            guard let equals = line.firstIndex(of: "=") else { throw TestFailure("not Key=value: \(line)") }
            settings.append((String(line[..<equals]), String(line[line.index(after: equals)...])))
        }
    }

    /// The last value of `key` (systemd's rule for single-valued settings).
    func value(_ key: String) -> String? { settings.last { $0.key == key }?.value }

    /// The variables set by `Environment=` lines.
    var environment: [String: String] {
        var values: [String: String] = [:]
        for setting in settings where setting.key == "Environment" {
            for word in ((try? Self.words(setting.value)) ?? []).map(\.text) {
                guard let equals = word.firstIndex(of: "=") else { continue }
                values[String(word[..<equals])] = String(word[word.index(after: equals)...])
            }
        }
        return values
    }

    /// `ExecStart=` as the program's argument vector (prefixes `-@+!` removed), variables from
    /// `environment`, `%H` as `hostName`.
    func execStart(environment: [String: String], hostName: String = "localhost") throws -> [String] {
        guard var line = value("ExecStart") else { throw TestFailure("no ExecStart") }
        while let first = line.first, "-@+!:".contains(first) { line.removeFirst() }
        var result: [String] = []
        for word in try Self.words(line) {
            var expanded = word.text.replacingOccurrences(of: "%%", with: "\u{0}").replacingOccurrences(of: "%H", with: hostName)
            expanded = expanded.replacingOccurrences(of: "\u{0}", with: "%")
            if !word.quoted, expanded.hasPrefix("$"), !expanded.hasPrefix("${") {
                let name = String(expanded.dropFirst())
                guard let value = environment[name] else { throw TestFailure("$\(name) is not set") }
                result += value.split(separator: " ").map(String.init)
                continue
            }
            while let start = expanded.range(of: "${"), let end = expanded[start.upperBound...].firstIndex(of: "}") {
                let name = String(expanded[start.upperBound..<end])
                guard let value = environment[name] else { throw TestFailure("${\(name)} is not set") }
                expanded.replaceSubrange(start.lowerBound...end, with: value)
            }
            result.append(expanded)
        }
        return result
    }

    private static func words(_ line: String) throws -> [(text: String, quoted: Bool)] {
        var words: [(String, Bool)] = []
        var current = ""
        var quote: Character?
        var inWord = false
        var quoted = false
        for character in line {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
                inWord = true
                quoted = true
            } else if character == " " || character == "\t" {
                if inWord { words.append((current, quoted)) }
                current = ""
                inWord = false
                quoted = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        guard quote == nil else { throw TestFailure("unbalanced quote in: \(line)") }
        if inWord { words.append((current, quoted)) }
        return words
    }
}
