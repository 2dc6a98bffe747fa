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
              required: [id, name, peer, format, state, started, seconds_on_disk, seconds_acknowledged, last_audio_received, gap_count, gap_seconds, file, levels, alarms]
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
            Marker:
              type: object
              required: [id, at_seconds, label]
              properties:
                id: { type: string, format: uuid }
                at_seconds: { type: number, description: "seconds from the stream's first sample" }
                label: { type: string, description: "empty when the marker has none" }
                gap_seconds: { type: number }
                file: { type: string }
                levels:
                  oneOf:
                    - { $ref: "#/components/schemas/Levels" }
                    - { type: "null" }
                alarms: { type: array, items: { $ref: "#/components/schemas/AlarmKind" }, description: "the alarms raised on the stream now" }
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

        """
}
