/// The HTTP API as an OpenAPI 3.1 document, served at `/api/openapi.yaml` (docs/HTTP-API.md is the
/// prose; a test checks the two name the same paths and fields).
enum OpenAPIDocument {
    static let yaml = """
        openapi: 3.1.0
        info:
          title: capture-recv HTTP API
          version: "1"
          description: >-
            The streams a capture-recv receiver records, their durability and live levels, their
            events, and live listening. On a loopback address no credentials are needed; elsewhere
            every request needs a token of --http-token-file (bearer) or the console's session
            cookie (POST /login). Everywhere, a request's Host must be one of the console's names
            (421 otherwise: DNS rebinding; --http-allow-host adds names), and a POST from a web page
            must come from a page at one of them (its Origin; 403 otherwise).
        security:
          - bearer: []
          - session: []
          - {}
        paths:
          /api/streams:
            get:
              summary: Every stream this receiver has seen (live, reconnecting, finished recently), oldest first.
              responses:
                "200":
                  description: The streams.
                  content:
                    application/json:
                      schema:
                        type: array
                        items: { $ref: "#/components/schemas/Stream" }
                "401": { $ref: "#/components/responses/Unauthorized" }
          /api/streams/{id}:
            get:
              summary: One stream.
              parameters:
                - { name: id, in: path, required: true, schema: { type: string, format: uuid } }
              responses:
                "200":
                  description: The stream.
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/Stream" }
                "400": { $ref: "#/components/responses/Error" }
                "404": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Unauthorized" }
          /api/streams/{id}/timeline:
            get:
              summary: "The stream's timeline: connections, reconnects, gaps, pauses, markers, alarms and its end, oldest first (its latest 500)."
              parameters:
                - { name: id, in: path, required: true, schema: { type: string, format: uuid } }
              responses:
                "200":
                  description: The timeline.
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/Timeline" }
                "400": { $ref: "#/components/responses/Error" }
                "404": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Unauthorized" }
          /api/streams/{id}/listen:
            get:
              summary: The stream's live audio as Ogg Opus (RFC 7845), from the live edge, for as long as it is live.
              parameters:
                - { name: id, in: path, required: true, schema: { type: string, format: uuid } }
              responses:
                "200":
                  description: Ogg Opus, streamed.
                  content:
                    audio/ogg:
                      schema: { type: string, format: binary }
                "404": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Unauthorized" }
          /api/events:
            get:
              summary: "Server-Sent Events: opened, resumed, gap, closed (data: a Stream, or a Gap), levels (about 10 a second per live stream), alarm (an Alarm raised or cleared) and marker (a Marker the person recording dropped)."
              responses:
                "200":
                  description: An event stream; each event's data is one JSON object.
                  content:
                    text/event-stream:
                      schema: { type: string }
                "401": { $ref: "#/components/responses/Unauthorized" }
          /api/recordings:
            get:
              summary: "The output folder's finished recordings, newest first (by start time). Files still being recorded or waiting for their stream to resume are not listed (they are in /api/streams)."
              parameters:
                - { name: stream, in: query, required: false, schema: { type: string }, description: "only this stream name (exact)" }
                - { name: day, in: query, required: false, schema: { type: string, format: date }, description: "only recordings starting on this UTC day, YYYY-MM-DD" }
              responses:
                "200":
                  description: The recordings.
                  content:
                    application/json:
                      schema:
                        type: array
                        items: { $ref: "#/components/schemas/Recording" }
                "400": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Unauthorized" }
          /api/recordings/file/{path}:
            get:
              summary: "A finished recording's CAF file, whole or one byte range (Range: bytes=A-B, bytes=A-, bytes=-N; several ranges get the whole file; If-Range honoured)."
              parameters:
                - { name: path, in: path, required: true, schema: { type: string }, description: "the recording's path as listed, relative to --out; its / are kept (not encoded)" }
                - { name: Range, in: header, required: false, schema: { type: string } }
              responses:
                "200":
                  description: "The whole file (Accept-Ranges: bytes; Content-Disposition: attachment)."
                  content:
                    audio/x-caf:
                      schema: { type: string, format: binary }
                "206":
                  description: "The range asked for, with Content-Range: bytes A-B/SIZE."
                  content:
                    audio/x-caf:
                      schema: { type: string, format: binary }
                "400": { $ref: "#/components/responses/Error" }
                "404": { $ref: "#/components/responses/Error" }
                "409": { $ref: "#/components/responses/Error" }
                "416":
                  description: "No byte of the range is in the file: Content-Range: bytes */SIZE."
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/Error" }
                "401": { $ref: "#/components/responses/Unauthorized" }
            head:
              summary: The same status and headers as GET, without the body.
              parameters:
                - { name: path, in: path, required: true, schema: { type: string } }
                - { name: Range, in: header, required: false, schema: { type: string } }
              responses:
                "200": { description: "The whole file's headers." }
                "206": { description: "The range's headers." }
                "404": { description: "No finished recording there." }
                "416": { description: "No byte of the range is in the file." }
          /api/recordings/export/{path}:
            get:
              summary: "A finished recording exported (as capture-recv export does) and streamed: Broadcast Wave, RF64, FLAC, or Ogg Opus for Opus recordings."
              parameters:
                - { name: path, in: path, required: true, schema: { type: string }, description: "the recording's path as listed, relative to --out" }
                - { name: format, in: query, required: true, schema: { type: string, enum: [wav, rf64, flac, ogg] } }
              responses:
                "200":
                  description: "The export, with Content-Disposition: attachment; filename=NAME.wav (.rf64.wav, .flac, .opus)."
                  content:
                    audio/wav:
                      schema: { type: string, format: binary }
                    audio/flac:
                      schema: { type: string, format: binary }
                    audio/ogg:
                      schema: { type: string, format: binary }
                "400": { $ref: "#/components/responses/Error" }
                "404": { $ref: "#/components/responses/Error" }
                "409": { $ref: "#/components/responses/Error" }
                "422": { $ref: "#/components/responses/Error" }
                "503": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Unauthorized" }
          /metrics:
            get:
              summary: Prometheus metrics (text exposition format 0.0.4).
              responses:
                "200":
                  description: The metrics.
                  content:
                    text/plain:
                      schema: { type: string }
        components:
          securitySchemes:
            bearer: { type: http, scheme: bearer }
            session: { type: apiKey, in: cookie, name: capture_console }
          responses:
            Unauthorized:
              description: No valid token or session.
              content:
                application/json:
                  schema: { $ref: "#/components/schemas/Error" }
            Error:
              description: What went wrong.
              content:
                application/json:
                  schema: { $ref: "#/components/schemas/Error" }
          schemas:
            Error:
              type: object
              required: [error]
              properties:
                error: { type: string }
            Recording:
              type: object
              required: [path, stream, stream_id, start, duration_seconds, frames, sample_rate, channels, format, gap_count, gap_seconds, marker_count, bytes, modified, complete]
              properties:
                path: { type: string, description: "relative to --out, / between folders" }
                stream: { type: string }
                stream_id: { type: string, description: "a lowercase UUID; empty when the file has none" }
                start: { type: [string, "null"], format: date-time, description: "UTC time of the file's first valid sample" }
                duration_seconds: { type: number }
                frames: { type: integer, description: "valid frames (Opus: priming and remainder left out)" }
                sample_rate: { type: number }
                channels: { type: integer }
                format: { type: string }
                gap_count: { type: integer, description: "gap markers, pauses included" }
                gap_seconds: { type: number }
                marker_count: { type: integer, description: "the other markers of the file's mark chunk (markers from the field)" }
                bytes: { type: integer }
                modified: { type: string, format: date-time }
                complete: { type: [boolean, "null"], description: "true: ended with its stream's end, or a segment its stream went on from; false: finalized without its end; null: no longer known (the stream index keeps how a stream ended for one resume window)" }
            Levels:
              type: object
              required: [peak_dbfs, rms_dbfs]
              properties:
                peak_dbfs: { type: array, items: { type: number, minimum: -120, maximum: 0 } }
                rms_dbfs: { type: array, items: { type: number, minimum: -120, maximum: 0 } }
                momentary_lufs: { type: number, minimum: -120, maximum: 20, description: "EBU R128 momentary loudness (400 ms); absent when the sender measures none" }
                short_term_lufs: { type: number, minimum: -120, maximum: 20, description: "EBU R128 short-term loudness (3 s); absent when the sender measures none" }
                true_peak_dbtp: { type: array, items: { type: number, minimum: -120, maximum: 20 }, description: "each channel's true peak over the latest audio; absent when the sender measures none" }
            Stream:
              type: object
              required: [id, name, peer, format, state, started, seconds_on_disk, seconds_acknowledged, last_audio_received, gap_count, gap_seconds, file, levels, alarms, capture_id, encoding]
              properties:
                id: { type: string, format: uuid }
                name: { type: string }
                peer: { type: string }
                format: { type: string }
                state: { type: string, enum: [live, reconnecting, finished] }
                started: { type: string, format: date-time }
                seconds_on_disk: { type: number }
                seconds_acknowledged: { type: number }
                last_audio_received: { type: [string, "null"], format: date-time }
                gap_count: { type: integer }
                gap_seconds: { type: number }
                file: { type: string }
                levels:
                  oneOf:
                    - { $ref: "#/components/schemas/Levels" }
                    - { type: "null" }
                alarms: { type: array, items: { $ref: "#/components/schemas/AlarmKind" }, description: "the alarms raised on the stream now" }
                capture_id: { type: [string, "null"], format: uuid, description: "the capture this stream is one encoding of, shared by the capture's streams; null when the sender named none" }
                encoding: { type: [string, "null"], description: "that encoding's label, like opus-64k-20ms; null when the stream names no capture" }
            Marker:
              type: object
              required: [id, at_seconds, label]
              properties:
                id: { type: string, format: uuid }
                at_seconds: { type: number, description: "seconds from the stream's first sample" }
                label: { type: string, description: "empty when the marker has none" }
            AlarmKind: { type: string, enum: [silence, clipping, loudness, link-down, no-audio] }
            Alarm:
              type: object
              required: [id, name, kind, change, since, detail, raised]
              properties:
                id: { type: string, format: uuid }
                name: { type: string }
                kind: { $ref: "#/components/schemas/AlarmKind" }
                change: { type: string, enum: [raised, cleared] }
                since: { type: string, format: date-time, description: "when the condition began (raised) or ended (cleared)" }
                detail: { type: string }
                raised: { type: array, items: { $ref: "#/components/schemas/AlarmKind" }, description: "every alarm raised on the stream after this change" }
            Gap:
              type: object
              required: [id, at_seconds, seconds, reason, gap_count]
              properties:
                id: { type: string, format: uuid }
                at_seconds: { type: number }
                seconds: { type: number }
                reason: { type: string }
                gap_count: { type: integer }
            Timeline:
              type: object
              required: [id, dropped, entries]
              properties:
                id: { type: string, format: uuid }
                dropped: { type: integer, description: older entries let go (a stream keeps its latest 500) }
                entries:
                  type: array
                  items:
                    type: object
                    required: [at, kind, stream_seconds, detail]
                    properties:
                      at: { type: string, format: date-time }
                      kind: { type: string, enum: [opened, resumed, reconnecting, finished, gap, pause, marker, alarm-raised, alarm-cleared] }
                      stream_seconds: { type: number, nullable: true, description: "gaps, pauses, markers: seconds from the stream's first sample" }
                      detail: { type: string }

        """
}
