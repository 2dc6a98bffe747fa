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

    /// The exec-form command of the Dockerfile's `HEALTHCHECK ... CMD [...]`.
    static func dockerfileHealthCheck(_ dockerfile: String) throws -> [String]? {
        guard let line = logicalLines(dockerfile).first(where: { $0.hasPrefix("HEALTHCHECK ") }),
              let command = line.range(of: " CMD ") else { return nil }
        return try jsonStringArray(String(line[command.upperBound...]))
    }

    /// The Dockerfile's `COPY SOURCE DESTINATION` lines from the build context (not `--from=`).
    static func dockerfileCopies(_ dockerfile: String) -> [(source: String, destination: String)] {
        logicalLines(dockerfile).compactMap { line in
            let words = line.split(separator: " ").map(String.init)
            guard words.count == 3, words[0] == "COPY", !words[1].hasPrefix("--") else { return nil }
            return (words[1], words[2])
        }
    }

    /// Each compose service's `volumes:` entries (`- SOURCE:TARGET` lines), by service name.
    static func composeVolumes(_ yaml: String) -> [String: [String]] {
        var volumes: [String: [String]] = [:]
        var service: String?
        var inVolumes = false
        for line in serviceLines(yaml) {
            let indent = line.prefix { $0 == " " }.count
            let content = line.trimmingCharacters(in: .whitespaces)
            if indent == 2, content.hasSuffix(":") {
                service = String(content.dropLast())
                inVolumes = false
            } else if indent == 4 {
                inVolumes = content == "volumes:"
            } else if inVolumes, indent == 6, content.hasPrefix("- "), let service {
                volumes[service, default: []].append(String(content.dropFirst(2)).trimmingCharacters(in: CharacterSet(charactersIn: "\"' ")))
            }
        }
        return volumes
    }

    /// Each compose service's `environment:` mapping (`KEY: value` lines, quotes removed), by service name.
    static func composeEnvironment(_ yaml: String) -> [String: [String: String]] {
        var environments: [String: [String: String]] = [:]
        var service: String?
        var inEnvironment = false
        for line in serviceLines(yaml) {
            let indent = line.prefix { $0 == " " }.count
            let content = line.trimmingCharacters(in: .whitespaces)
            if indent == 2, content.hasSuffix(":") {
                service = String(content.dropLast())
                inEnvironment = false
            } else if indent == 4 {
                inEnvironment = content == "environment:"
            } else if inEnvironment, indent == 6, let colon = content.firstIndex(of: ":"), let service {
                let value = content[content.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: "\"' "))
                environments[service, default: [:]][String(content[..<colon])] = value
            }
        }
        return environments
    }

    /// Each compose service's scalar `key: value` (directly under the service), by service name.
    static func composeValues(_ yaml: String, key: String) -> [String: String] {
        var values: [String: String] = [:]
        var service: String?
        for line in serviceLines(yaml) {
            let indent = line.prefix { $0 == " " }.count
            let content = line.trimmingCharacters(in: .whitespaces)
            if indent == 2, content.hasSuffix(":") {
                service = String(content.dropLast())
            } else if indent == 4, content.hasPrefix("\(key):"), let service {
                values[service] = content.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces)
            }
        }
        return values
    }

    /// The lines of the top-level `services:` block, comments dropped.
    private static func serviceLines(_ yaml: String) -> [String] {
        var lines: [String] = []
        var inServices = false
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("services:") { inServices = true; continue }
            if !line.hasPrefix(" "), !line.isEmpty, !line.hasPrefix("#") { inServices = false }
            if inServices, !line.trimmingCharacters(in: .whitespaces).hasPrefix("#"), !line.isEmpty { lines.append(line) }
        }
        return lines
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
/// (quotes, `${VAR}` as one word, `$VAR` split at spaces into as many words, none when empty).
///
/// Specifiers, as systemd expands them for a system service (`man systemd.unit`, "Specifiers"):
/// `%H` the host name (the test passes its own), `%S` the state directory root `/var/lib`
/// (StateDirectory= folders are `%S/NAME`), `%%` a percent sign. Any other specifier is an error
/// here, so a unit cannot start using one the tests would pass on unexpanded.
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

    /// The variables set by `Environment=` lines, with specifiers expanded as systemd does
    /// (`%H` as `hostName`).
    func environment(hostName: String = "localhost") throws -> [String: String] {
        var values: [String: String] = [:]
        for setting in settings where setting.key == "Environment" {
            for word in try Self.words(setting.value).map(\.text) {
                guard let equals = word.firstIndex(of: "=") else { continue }
                values[String(word[..<equals])] = try Self.expandSpecifiers(String(word[word.index(after: equals)...]), hostName: hostName)
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
            var expanded = try Self.expandSpecifiers(word.text, hostName: hostName)
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

    /// The specifiers systemd expands for a system service, by letter.
    static func specifiers(hostName: String) -> [Character: String] {
        ["H": hostName, "S": "/var/lib", "%": "%"]
    }

    private static func expandSpecifiers(_ text: String, hostName: String) throws -> String {
        let known = specifiers(hostName: hostName)
        var result = ""
        var iterator = text.makeIterator()
        while let character = iterator.next() {
            guard character == "%" else { result.append(character); continue }
            guard let letter = iterator.next(), let value = known[letter] else {
                throw TestFailure("unsupported specifier in \(text): add it to SystemdUnit.specifiers as systemd expands it")
            }
            result += value
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
