import CaptureCore
import XCTest

/// The library's own naming of its settings names each one, in words, never as a flag.
final class SettingNamingTests: XCTestCase {
    func testTheLibraryNamesEverySettingWithoutAFlag() {
        let naming = LibrarySettingNames()
        for setting in Setting.allCases {
            let name = naming.name(of: setting)
            XCTAssertFalse(name.isEmpty, "\(setting)")
            XCTAssertFalse(name.contains("--"), "\(setting): \(name)")
        }
    }

    func testEverySettingHasANameOfItsOwn() {
        let naming = LibrarySettingNames()
        let names = Set(Setting.allCases.map { naming.name(of: $0) })
        XCTAssertEqual(names.count, Setting.allCases.count)
    }
}
