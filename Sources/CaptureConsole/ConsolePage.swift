/// The console page the receiver serves at `/`: plain HTML, CSS and a small script, no build step,
/// nothing fetched from elsewhere. It lists every stream with live meters (peak and RMS per channel
/// on a dBFS scale, the peak and the loudness in figures, a clip lamp that stays lit until clicked),
/// its state and raised alarms, how far its durable audio trails the live edge, its gaps, a
/// timeline (connections, reconnects, gaps, pauses, markers, alarms) and a play button that points
/// the browser's own `<audio>` element at the stream's listen URL. A banner under the header names
/// every stream with a raised alarm, and such a stream's row is tinted. Below, the recordings view
/// lists the finished files (by stream and day), each to download or export. It fits a phone's
/// screen.
enum ConsolePage {
    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>capture-recv console</title>
        <link rel="stylesheet" href="/console.css">
        </head>
        <body>
        <header><h1>capture-recv</h1><span id="link" class="link">connecting…</span></header>
        <div id="alarms" class="banner" role="alert" hidden></div>
        <main>
        <p id="empty" class="empty">No streams yet. Field units appear here as soon as they connect.</p>
        <table id="streams" hidden>
        <thead><tr><th>Stream</th><th>State</th><th>Levels</th><th>On disk</th><th>Gaps</th><th>Listen</th></tr></thead>
        <tbody></tbody>
        </table>
        <section id="recordings-view">
        <h2>Recordings</h2>
        <form id="recordings-filter" class="filter">
        <label>Stream <select id="filter-stream"><option value="">all</option></select></label>
        <label>Day (UTC) <input type="date" id="filter-day"></label>
        </form>
        <p id="no-recordings" class="empty">No finished recordings.</p>
        <table id="recordings" hidden>
        <thead><tr><th>File</th><th>Start (UTC)</th><th>Duration</th><th>Gaps</th><th>Markers</th><th>Complete</th><th>Get</th></tr></thead>
        <tbody></tbody>
        </table>
        </section>
        </main>
        <audio id="player" preload="none"></audio>
        <script src="/console.js"></script>
        </body>
        </html>
        """

    static let css = """
        :root { color-scheme: light dark; --ok: #2e9e4f; --warn: #d08a00; --bad: #c62828; --bar: #2e9e4f; }
        body { font: 15px/1.4 system-ui, sans-serif; margin: 0; }
        header { display: flex; align-items: baseline; gap: 1em; padding: .6em 1em; border-bottom: 1px solid #8884; }
        h1 { font-size: 1.2em; margin: 0; }
        .link { font-size: .85em; opacity: .8; }
        main { padding: .5em 1em; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: .45em .5em; border-bottom: 1px solid #8883; vertical-align: middle; }
        .name { font-weight: 600; }
        .sub { font-size: .8em; opacity: .75; }
        .state-live { color: var(--ok); } .state-reconnecting { color: var(--warn); } .state-finished { opacity: .6; }
        .meters { display: grid; gap: 3px; min-width: 10em; }
        .scale { position: relative; height: 1.1em; font-size: .7em; opacity: .7; }
        .scale span { position: absolute; transform: translateX(-50%); white-space: nowrap; }
        .scale span:first-child { transform: none; } .scale span:last-child { transform: translateX(-100%); }
        .figures { font-size: .8em; font-variant-numeric: tabular-nums; white-space: nowrap; }
        .lamp { display: inline-block; margin-right: .5em; padding: 0 .35em; border-radius: 3px; border: 1px solid #8886; font-size: .75em; font-weight: 700; opacity: .35; cursor: pointer; }
        .lamp.lit { opacity: 1; background: var(--bad); border-color: var(--bad); color: white; }
        button.timeline-toggle { font: inherit; font-size: .85em; padding: .2em .6em; border-radius: 4px; border: 1px solid #8886; background: none; cursor: pointer; margin-top: .3em; }
        tr.timeline-row td { padding-top: 0; }
        ol.timeline { list-style: none; margin: 0; padding: 0 0 .4em 0; max-height: 16em; overflow-y: auto; font-size: .85em; }
        ol.timeline li { display: grid; grid-template-columns: 6.5em 7.5em 1fr; gap: .5em; padding: .15em 0; border-bottom: 1px dotted #8884; }
        ol.timeline .kind { font-weight: 600; }
        .kind-gap, .kind-reconnecting { color: var(--warn); } .kind-alarm-raised { color: var(--bad); } .kind-alarm-cleared, .kind-opened, .kind-resumed { color: var(--ok); }
        .kind-pause { color: #5c6bc0; } .kind-marker { color: #8e24aa; }
        h2 { font-size: 1.05em; margin: 1.5em 0 .4em; }
        .filter { display: flex; flex-wrap: wrap; gap: .5em 1.5em; margin-bottom: .5em; }
        .filter select, .filter input { font: inherit; }
        .get a { margin-right: .6em; white-space: nowrap; }
        .incomplete { color: var(--warn); }
        td.path { word-break: break-all; }
        .meter { position: relative; height: 10px; background: #8882; border-radius: 2px; overflow: hidden; }
        .meter .rms { position: absolute; inset: 0 auto 0 0; background: var(--bar); }
        .meter .peak { position: absolute; top: 0; bottom: 0; width: 2px; background: currentColor; }
        .meter.clip { outline: 2px solid var(--bad); }
        .meter.clip .rms { background: var(--bad); }
        button.play { font: inherit; padding: .3em .8em; border-radius: 4px; border: 1px solid #8886; background: none; cursor: pointer; }
        button.play.playing { background: var(--ok); color: white; }
        .empty { opacity: .7; }
        .banner { padding: .5em 1em; background: var(--bad); color: white; font-weight: 600; }
        tr.alarmed { background: #c6282822; }
        .alarm { display: inline-block; margin: 0 0 0 .4em; padding: 0 .4em; border-radius: 3px; background: var(--bad); color: white; font-size: .8em; }
        @media (max-width: 640px) {
          thead { display: none; }
          table, tbody, tr, td { display: block; width: auto; }
          tr { border-bottom: 1px solid #8885; padding: .4em 0; }
          td { border: 0; padding: .2em 0; }
          td[data-label]::before { content: attr(data-label) ": "; opacity: .6; font-size: .85em; }
          .meters, .scale { min-width: 0; width: 100%; }
          ol.timeline li { grid-template-columns: 5.5em 1fr; }
          ol.timeline li .detail { grid-column: 1 / -1; }
          .figures { white-space: normal; }
        }
        """

    static let script = """
        "use strict";
        // The console: rows from /api/streams, kept current by /api/events (docs/HTTP-API.md).
        const rows = new Map();
        const tbody = document.querySelector("#streams tbody");
        const player = document.getElementById("player");
        let playing = null;

        function percent(dbfs) { return Math.max(0, Math.min(100, (dbfs + 60) / 60 * 100)); }
        function seconds(s) { return s < 60 ? s.toFixed(1) + " s" : (s / 60).toFixed(1) + " min"; }

        const SCALE = [-60, -48, -36, -24, -18, -12, -6, -3, 0];
        function fixed(value) { return (value <= -120 ? "-inf" : value.toFixed(1)); }

        // The meters of a stream's levels: a bar (RMS) and a tick (peak) per channel on a dBFS
        // scale, the loudest peak and the loudness in figures, and the clip lamp.
        function meters(cell, levels, row) {
          const count = levels ? levels.peak_dbfs.length : 0;
          let box = cell.querySelector(".meters");
          if (!box || box.children.length !== count) {
            cell.textContent = "";
            if (count === 0) { cell.textContent = "—"; return; }
            box = document.createElement("div");
            box.className = "meters";
            for (let i = 0; i < count; i++) {
              const meter = document.createElement("div");
              meter.className = "meter";
              meter.innerHTML = '<div class="rms"></div><div class="peak"></div>';
              box.appendChild(meter);
            }
            const scale = document.createElement("div");
            scale.className = "scale";
            for (const mark of SCALE) {
              const label = document.createElement("span");
              label.style.left = percent(mark) + "%";
              label.textContent = mark;
              scale.appendChild(label);
            }
            const figures = document.createElement("div");
            figures.className = "figures";
            figures.innerHTML = '<span class="lamp" title="lights when a channel reaches full scale; click to reset">CLIP</span><span class="numbers"></span>';
            figures.querySelector(".lamp").addEventListener("click", (e) => { e.target.classList.remove("lit"); e.target.title = "lights when a channel reaches full scale; click to reset"; });
            cell.append(box, scale, figures);
          }
          let loudest = -120;
          let clipped = false;
          for (let i = 0; i < count; i++) {
            const meter = box.children[i];
            const peak = levels.peak_dbfs[i], rms = levels.rms_dbfs[i];
            loudest = Math.max(loudest, peak);
            meter.querySelector(".rms").style.width = percent(rms) + "%";
            meter.querySelector(".peak").style.left = "calc(" + percent(peak) + "% - 2px)";
            meter.classList.toggle("clip", peak >= -0.1);
            clipped = clipped || peak >= -0.1 || (levels.true_peak_dbtp || [])[i] >= 0;
            meter.title = "channel " + (i + 1) + ": peak " + fixed(peak) + " dBFS, RMS " + fixed(rms) + " dBFS";
          }
          const parts = ["peak " + fixed(loudest) + " dBFS"];
          if (levels.short_term_lufs !== undefined && levels.short_term_lufs !== null) parts.push("S " + fixed(levels.short_term_lufs) + " LUFS");
          if (levels.momentary_lufs !== undefined && levels.momentary_lufs !== null) parts.push("M " + fixed(levels.momentary_lufs) + " LUFS");
          if (levels.true_peak_dbtp && levels.true_peak_dbtp.length) parts.push("TP " + fixed(Math.max(...levels.true_peak_dbtp)) + " dBTP");
          cell.querySelector(".numbers").textContent = parts.join(" · ");
          if (clipped) {
            const lamp = cell.querySelector(".lamp");
            lamp.classList.add("lit");
            lamp.title = "clipped at " + new Date().toLocaleTimeString() + "; click to reset";
          }
        }

        // A stream's timeline, under its row while open: fetched, and fetched again on each event
        // about the stream.
        const openTimelines = new Set();
        function timelineRow(row) {
          let next = row.nextElementSibling;
          if (next && next.classList.contains("timeline-row")) return next;
          next = document.createElement("tr");
          next.className = "timeline-row";
          next.innerHTML = '<td colspan="6"><ol class="timeline"></ol></td>';
          row.after(next);
          return next;
        }
        function toggleTimeline(id) {
          const row = rows.get(id);
          const button = row.querySelector(".timeline-toggle");
          if (openTimelines.has(id)) {
            openTimelines.delete(id);
            timelineRow(row).remove();
            button.textContent = "Timeline";
            return;
          }
          openTimelines.add(id);
          button.textContent = "Hide timeline";
          loadTimeline(id);
        }
        async function loadTimeline(id) {
          if (!openTimelines.has(id)) return;
          try {
            const response = await fetch("/api/streams/" + id + "/timeline", { cache: "no-store" });
            if (!response.ok || !openTimelines.has(id)) return;
            const timeline = await response.json();
            const list = timelineRow(rows.get(id)).querySelector("ol");
            list.textContent = "";
            if (timeline.dropped > 0) {
              const note = document.createElement("li");
              note.textContent = timeline.dropped + " earlier entries not kept";
              list.appendChild(note);
            }
            for (const entry of timeline.entries) {
              const item = document.createElement("li");
              item.className = "entry kind-" + entry.kind;
              item.dataset.kind = entry.kind;
              const at = entry.stream_seconds === null ? "" : " @ " + entry.stream_seconds.toFixed(1) + " s";
              item.innerHTML = '<span class="time"></span><span class="kind"></span><span class="detail"></span>';
              item.querySelector(".time").textContent = new Date(entry.at).toLocaleTimeString([], { hour12: false });
              item.querySelector(".kind").textContent = entry.kind.replace("-", " ");
              item.querySelector(".detail").textContent = entry.detail + at;
              list.appendChild(item);
            }
            list.scrollTop = list.scrollHeight;
          } catch (e) { /* shown by the event link */ }
        }

        function render(stream) {
          let row = rows.get(stream.id);
          if (!row) {
            row = document.createElement("tr");
            row.dataset.id = stream.id;
            row.innerHTML = '<td data-label="Stream"><div class="name"></div><div class="sub peer"></div><div class="sub format"></div></td>' +
              '<td data-label="State" class="state"></td><td data-label="Levels" class="levels"></td>' +
              '<td data-label="On disk" class="disk"></td><td data-label="Gaps" class="gaps"></td>' +
              '<td><button class="play" type="button">Play</button><br><button class="timeline-toggle" type="button">Timeline</button></td>';
            row.querySelector("button.play").addEventListener("click", () => toggle(stream.id));
            row.querySelector("button.timeline-toggle").addEventListener("click", () => toggleTimeline(stream.id));
            rows.set(stream.id, row);
            // The streams of one capture (its encodings) stand together: a new one goes after the
            // capture's last row (and its timeline, when open).
            const sibling = stream.capture_id ? [...rows.values()].filter((other) => other !== row && other.dataset.capture === stream.capture_id).pop() : null;
            if (sibling) {
              const after = sibling.nextElementSibling && sibling.nextElementSibling.classList.contains("timeline-row") ? sibling.nextElementSibling : sibling;
              after.after(row);
            } else {
              tbody.appendChild(row);
            }
          }
          if (stream.capture_id) row.dataset.capture = stream.capture_id;
          row.stream = stream;
          row.querySelector(".name").textContent = stream.name;
          row.querySelector(".peer").textContent = stream.peer + " · " + stream.file;
          row.querySelector(".format").textContent = stream.format +
            (stream.encoding ? " · " + stream.encoding + " of capture " + stream.capture_id.slice(0, 8) : "");
          const state = row.querySelector(".state");
          state.textContent = stream.state;
          state.className = "state state-" + stream.state;
          showAlarms(row);
          const elapsed = (Date.now() - Date.parse(stream.started)) / 1000;
          const lag = Math.max(0, elapsed - stream.seconds_on_disk);
          row.querySelector(".disk").textContent = seconds(stream.seconds_on_disk) +
            (stream.state === "live" ? " (" + lag.toFixed(1) + " s behind)" : "");
          row.querySelector(".gaps").textContent = stream.gap_count === 0 ? "none" : stream.gap_count + " (" + seconds(stream.gap_seconds) + ")";
          row.querySelector("button.play").disabled = stream.state !== "live";
          meters(row.querySelector(".levels"), stream.levels, row);
          document.getElementById("streams").hidden = rows.size === 0;
          document.getElementById("empty").hidden = rows.size !== 0;
        }

        // A row's raised alarms: a badge each in its state cell, the row tinted, and the banner.
        function showAlarms(row) {
          const alarms = row.stream.alarms || [];
          const state = row.querySelector(".state");
          for (const badge of [...state.querySelectorAll(".alarm")]) badge.remove();
          for (const kind of alarms) {
            const badge = document.createElement("div");
            badge.className = "alarm";
            badge.textContent = kind;
            state.appendChild(badge);
          }
          row.classList.toggle("alarmed", alarms.length > 0);
          banner();
        }

        // The banner: every stream with a raised alarm, and which.
        function banner() {
          const alarmed = [...rows.values()].map((row) => row.stream).filter((stream) => (stream.alarms || []).length > 0);
          const box = document.getElementById("alarms");
          box.hidden = alarmed.length === 0;
          box.textContent = alarmed.map((stream) => stream.name + ": " + stream.alarms.join(", ")).join(" · ");
        }

        function toggle(id) {
          const button = rows.get(id).querySelector("button.play");
          if (playing === id) {
            player.pause();
            player.removeAttribute("src");
            player.load();
            playing = null;
            button.classList.remove("playing");
            button.textContent = "Play";
            return;
          }
          if (playing) toggle(playing);
          player.src = "/api/streams/" + id + "/listen";
          player.play().catch(() => {});
          playing = id;
          button.classList.add("playing");
          button.textContent = "Stop";
        }

        async function refresh() {
          try {
            const response = await fetch("/api/streams", { cache: "no-store" });
            if (response.ok) for (const stream of await response.json()) render(stream);
          } catch (e) { /* shown by the event link */ }
        }

        function connect() {
          const link = document.getElementById("link");
          const events = new EventSource("/api/events");
          events.onopen = () => { link.textContent = "live"; refresh(); };
          events.onerror = () => { link.textContent = "reconnecting…"; };
          for (const name of ["opened", "resumed", "closed"]) {
            events.addEventListener(name, (e) => {
              const stream = JSON.parse(e.data);
              render(stream);
              loadTimeline(stream.id);
              offerStream(stream.name);
              if (name === "closed") loadRecordings();
            });
          }
          events.addEventListener("levels", (e) => {
            const update = JSON.parse(e.data);
            const row = rows.get(update.id);
            if (row) meters(row.querySelector(".levels"), update, row);
          });
          events.addEventListener("alarm", (e) => {
            const alarm = JSON.parse(e.data);
            const row = rows.get(alarm.id);
            if (row) { row.stream.alarms = alarm.raised; showAlarms(row); }
            loadTimeline(alarm.id);
          });
          events.addEventListener("marker", (e) => loadTimeline(JSON.parse(e.data).id));
          events.addEventListener("gap", (e) => {
            const gap = JSON.parse(e.data);
            const row = rows.get(gap.id);
            // The row's figures only: its lag is re-read with the next refresh.
            if (row) {
              row.stream.gap_count = gap.gap_count;
              row.stream.gap_seconds += gap.seconds;
              row.querySelector(".gaps").textContent = row.stream.gap_count + " (" + seconds(row.stream.gap_seconds) + ")";
            }
            loadTimeline(gap.id);
          });
        }

        // The recordings view: finished files from /api/recordings, by stream and day.
        function duration(s) {
          const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), sec = s % 60;
          return (h ? h + ":" + String(m).padStart(2, "0") : m) + ":" + sec.toFixed(1).padStart(4, "0");
        }
        function encodedPath(path) { return path.split("/").map(encodeURIComponent).join("/"); }
        const knownStreams = new Set();
        function offerStream(name) {
          if (!name || knownStreams.has(name)) return;
          knownStreams.add(name);
          const select = document.getElementById("filter-stream");
          const option = document.createElement("option");
          option.value = name;
          option.textContent = name;
          select.appendChild(option);
        }
        async function loadRecordings() {
          const query = new URLSearchParams();
          const stream = document.getElementById("filter-stream").value;
          const day = document.getElementById("filter-day").value;
          if (stream) query.set("stream", stream);
          if (day) query.set("day", day);
          try {
            const response = await fetch("/api/recordings?" + query.toString(), { cache: "no-store" });
            if (!response.ok) return;
            const recordings = await response.json();
            const body = document.querySelector("#recordings tbody");
            body.textContent = "";
            for (const recording of recordings) {
              offerStream(recording.stream);
              const row = document.createElement("tr");
              row.dataset.path = recording.path;
              row.innerHTML = '<td data-label="File" class="path"><div class="name"></div><div class="sub"></div></td>' +
                '<td data-label="Start" class="start"></td><td data-label="Duration" class="duration"></td>' +
                '<td data-label="Gaps" class="gaps"></td><td data-label="Markers" class="markers"></td>' +
                '<td data-label="Complete" class="complete"></td><td data-label="Get" class="get"></td>';
              row.querySelector(".name").textContent = recording.path;
              row.querySelector(".sub").textContent = recording.stream + " · " + recording.format;
              row.querySelector(".start").textContent = recording.start ? recording.start.replace("T", " ").replace(".000Z", "Z") : "unknown";
              row.querySelector(".duration").textContent = duration(recording.duration_seconds);
              row.querySelector(".gaps").textContent = recording.gap_count === 0 ? "none" : recording.gap_count + " (" + seconds(recording.gap_seconds) + ")";
              row.querySelector(".markers").textContent = recording.marker_count;
              const complete = row.querySelector(".complete");
              complete.textContent = recording.complete === true ? "yes" : recording.complete === false ? "no: ended without its stream's end" : "unknown";
              complete.classList.toggle("incomplete", recording.complete === false);
              const get = row.querySelector(".get");
              const links = [["CAF", "/api/recordings/file/" + encodedPath(recording.path)]];
              const formats = recording.format.startsWith("opus") ? ["ogg", "wav", "flac"] : ["wav", "rf64", "flac"];
              for (const format of formats) links.push([format.toUpperCase(), "/api/recordings/export/" + encodedPath(recording.path) + "?format=" + format]);
              for (const [label, href] of links) {
                const link = document.createElement("a");
                link.href = href;
                link.textContent = label;
                link.setAttribute("download", "");
                link.className = "get-" + label.toLowerCase();
                get.appendChild(link);
              }
              body.appendChild(row);
            }
            document.getElementById("recordings").hidden = recordings.length === 0;
            document.getElementById("no-recordings").hidden = recordings.length !== 0;
          } catch (e) { /* shown by the event link */ }
        }
        document.getElementById("filter-stream").addEventListener("change", loadRecordings);
        document.getElementById("filter-day").addEventListener("change", loadRecordings);

        refresh();
        connect();
        loadRecordings();
        setInterval(refresh, 2000);
        setInterval(loadRecordings, 10000);
        """

    /// The login form (a token of `--http-token-file` sets the session cookie); `message` says why
    /// the last attempt failed.
    static func login(message: String?) -> String {
        let note = message.map { "<p class=\"error\">\(escape($0))</p>" } ?? ""
        return """
            <!doctype html>
            <html lang="en">
            <head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>capture-recv console: log in</title><link rel="stylesheet" href="/console.css"></head>
            <body><header><h1>capture-recv</h1></header><main>
            <p>This receiver's console plays live audio; it needs one of the tokens of its <code>--http-token-file</code>.</p>
            \(note)
            <form method="post" action="/login"><label>Token <input name="token" type="password" autocomplete="current-password" required autofocus></label>
            <button type="submit">Log in</button></form>
            </main></body></html>
            """
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
