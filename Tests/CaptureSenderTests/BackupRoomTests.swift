import CaptureSender
import XCTest

/// `BackupRoom`, which backups the packet log gives up so that what only they lack never costs the
/// main receiver: a table over the main's and the backups' backlogs, and the words of the reason.
final class BackupRoomTests: XCTestCase {
    func testOnlyBackupsWhoseBacklogWouldPassTheRoomWhileTheMainsFitsAreGivenUp() {
        let room = BackupRoom(bytes: 1_000, limit: .spoolMax)
        let one = LogDestination.backup(1)
        let two = LogDestination.backup(2)
        let rows: [(String, Int, Int, [(destination: LogDestination, held: Int)], [LogDestination])] = [
            ("everyone fits", 50, 100, [(one, 900), (two, 0)], []),
            ("exactly full still fits", 50, 950, [(one, 950)], []),
            ("one byte over: that backup goes", 50, 100, [(one, 951), (two, 400)], [one]),
            ("both over: both go, in order", 1, 0, [(one, 1_000), (two, 5_000)], [one, two]),
            ("the main does not fit: it overflows of its own accord, no backup goes", 50, 951, [(one, 2_000)], []),
            ("nothing incoming (a source that would wait): over the room goes", 0, 1_000, [(one, 1_001)], [one]),
            ("a backlog near Int.max does not trap: it is over", 10, 0, [(one, Int.max - 5)], [one]),
            ("no backups", 50, 100, [], []),
        ]
        for (name, incoming, main, backups, expected) in rows {
            XCTAssertEqual(room.backupsToGiveUp(incoming: incoming, mainHeld: main, backups: backups), expected, name)
        }
    }

    func testTheReasonNamesTheLimitAndItsSize() {
        XCTAssertEqual(
            BackupRoom(bytes: 1 << 20, limit: .spoolMax).description,
            "its acknowledgements fell 1.0 MiB behind, the spool's limit (CaptureStreamer.Configuration.spoolCapacity), and keeping more for it would have cost the main receiver audio")
        XCTAssertEqual(
            BackupRoom(bytes: 3 << 20, limit: .fastSource).description,
            "its acknowledgements fell 3.0 MiB behind, the most a source read faster than real time may keep unacknowledged, and waiting for it would have held up the main receiver")
        XCTAssertEqual(
            BackupRoom(bytes: 4 << 30, limit: .spoolMax).description,
            "its acknowledgements fell 4.0 GiB behind, the spool's limit (CaptureStreamer.Configuration.spoolCapacity), and keeping more for it would have cost the main receiver audio")
        XCTAssertEqual(
            BackupRoom(bytes: 10_000, limit: .fastSource).description,
            "its acknowledgements fell 10000 bytes behind, the most a source read faster than real time may keep unacknowledged, and waiting for it would have held up the main receiver")
    }
}
