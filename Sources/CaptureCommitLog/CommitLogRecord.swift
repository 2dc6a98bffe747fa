/// One entry of the commit log, as its user defines it: a kind (what the body means), the subject
/// it is about (the receiver's number for a stream) and the body. The log keeps records in the order
/// they were appended and gives them back whole at replay or not at all; what they mean is the
/// receiver's business.
public struct CommitLogRecord: Equatable, Sendable {
    /// What the body means (defined by the log's user).
    public var kind: UInt8
    /// Whom the record is about (defined by the log's user; a stream's number in the receiver).
    public var subject: UInt64
    /// The record's bytes.
    public var body: [UInt8]

    public init(kind: UInt8, subject: UInt64, body: [UInt8]) {
        self.kind = kind
        self.subject = subject
        self.body = body
    }

    /// Bytes of a record's header in a batch: kind, three zero bytes, body length, subject.
    static let headerSize = 16

    /// Bytes the record takes in a batch: header, body, padding to the log's alignment.
    var encodedSize: Int { CommitLogBatch.aligned(Self.headerSize + body.count) }
}
