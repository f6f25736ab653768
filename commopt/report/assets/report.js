(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var D = JSON.parse(document.getElementById("commopt-data").textContent);
  var ROW_H = 20, ROW_GAP = 3, AXIS_H = 18, MEM_H = 60, MIN_PX = 1.5, AGG_PX = 3;
  // browsers lay out at most ~2^25 px; stay well inside so positions stay exact
  var MAX_PX = 16777216;
  var KINDS = ["compute", "collective", "wait"];
  var zoom = 1;
  var panels = [];
  var tip = document.getElementById("tip");
  var syncing = false;

  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, attrs[k]); }
    if (parent) parent.appendChild(e);
    return e;
  }
  function num(x, digits) {
    var s = x.toFixed(digits), parts = s.split(".");
    parts[0] = parts[0].replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return parts.join(".");
  }
  function us(x) { return num(x, 1) + " us"; }
  function bytes(b) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], v = b, u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u += 1; }
    return u === 0 ? v.toFixed(0) + " B" : v.toFixed(1) + " " + units[u];
  }

  function setup() {
    D.schedules.forEach(function (s) {
      var sec = document.getElementById("sched-" + s.label);
      var labels = sec.querySelector(".labels");
      var scroll = sec.querySelector(".scroll");
      var svg = el("svg", {"class": "timeline"}, scroll);
      var p = {s: s, sec: sec, scroll: scroll, svg: svg, lanes: []};
      var head = document.createElement("div");
      head.style.height = AXIS_H + "px";
      labels.appendChild(head);
      p.axis = el("g", {"class": "axis"}, svg);
      var y = AXIS_H;
      s.lanes.forEach(function (lane, li) {
        var h = lane.rows * (ROW_H + ROW_GAP) + ROW_GAP;
        var label = document.createElement("div");
        label.style.height = h + "px";
        label.textContent = lane.title;
        label.title = lane.title + (lane.group !== null ? " (c10d group " + lane.group + ")" : "") +
          ": " + lane.events + " spans";
        labels.appendChild(label);
        var bg = el("rect", {"class": "lane-bg" + (li % 2 ? " odd" : ""), x: 0, y: y, height: h}, svg);
        var g = el("g", {"class": "lane", "data-lane": lane.name, "data-events": lane.events,
                         "data-rows": lane.rows, transform: "translate(0," + (y + ROW_GAP) + ")"}, svg);
        var maxDur = 0, ev = lane.ev;
        for (var k = 0; k < ev.length; k += 5) { maxDur = Math.max(maxDur, ev[k + 1] - ev[k]); }
        p.lanes.push({lane: lane, g: g, bg: bg, maxDur: maxDur, y: y + ROW_GAP,
                      levels: buildLevels(lane)});
        y += h;
      });
      var memLabel = document.createElement("div");
      memLabel.style.height = MEM_H + "px";
      memLabel.textContent = "memory (peak " + bytes(s.peak_bytes) + ")";
      labels.appendChild(memLabel);
      p.memBg = el("rect", {"class": "lane-bg", x: 0, y: y, height: MEM_H}, svg);
      p.mem = el("polyline", {"class": "mem"}, svg);
      p.memAxis = el("g", {"class": "mem-axis"}, svg);
      p.memY = y;
      y += MEM_H;
      p.height = y;
      p.linkLayer = el("g", {"class": "links"}, svg);
      svg.setAttribute("height", y);
      // collective -> wait links of this schedule, by collective node and by wait node
      p.linkOf = {};
      for (var k = 0; k < s.links.length; k += 6) {
        p.linkOf[s.links[k]] = k;
        if (s.links[k + 1] >= 0) p.linkOf[s.links[k + 1]] = k;
      }
      svg.addEventListener("mouseover", function (e) { if (!drag) { showTip(p, e); showLink(p, e); } });
      svg.addEventListener("mousemove", moveTip);
      svg.addEventListener("mouseout", function () { tip.style.display = "none"; clearLink(); });
      svg.addEventListener("dblclick", function (e) { zoomToSpan(p, e); });
      scroll.addEventListener("scroll", function () { onScroll(p); });
      scroll.addEventListener("wheel", onWheel, {passive: false});
      scroll.addEventListener("mousedown", function (e) { startDrag(p, e); });
      panels.push(p);
    });
  }

  function baseWidth() { return Math.max(200, panels.length ? panels[0].scroll.clientWidth : 800); }
  function maxZoom() { return Math.max(1, Math.floor(MAX_PX / baseWidth())); }
  function fullWidth() { return baseWidth() * zoom; }

  function lowerBound(ev, t) {
    var lo = 0, hi = ev.length / 5;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (ev[mid * 5] < t) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // Far-out zoom levels: a lane of many spans is also summed, per row, into bins of
  // span_us / LEVEL0_BINS microseconds, and each coarser level into bins twice as wide. A view
  // where a bin is under half a merge gap wide draws the coarsest such level's bins instead
  // of every span, so its cost follows the pixels on screen, not the spans in the graph.
  var LEVEL0_BINS = 65536, LEVELS_FROM = 4096, TOP_BINS = 64;

  function newBins() {
    return {bin: [], s: [], e: [], first: [], last: [], count: [], busy: [], exposed: [], maxDur: []};
  }
  function pushBin(B, bin, s, e, first, last, count, busy, exposed, maxDur) {
    B.bin.push(bin); B.s.push(s); B.e.push(e); B.first.push(first); B.last.push(last);
    B.count.push(count); B.busy.push(busy); B.exposed.push(exposed); B.maxDur.push(maxDur);
  }
  function addToBin(B, m, e, last, count, busy, exposed, maxDur) {
    B.e[m] = Math.max(B.e[m], e); B.last[m] = last; B.count[m] += count;
    B.busy[m] += busy; B.exposed[m] += exposed; B.maxDur[m] = Math.max(B.maxDur[m], maxDur);
  }
  function buildLevels(lane) {
    var ev = lane.ev, n = ev.length / 5;
    if (n < LEVELS_FROM) return null;
    var w = D.span_us / LEVEL0_BINS, rows = [], r, k, m;
    for (r = 0; r < lane.rows; r++) rows.push(newBins());
    for (k = 0; k < n; k++) {  // spans of a row come in start order: so do its bins
      var s = ev[k * 5], e = ev[k * 5 + 1], B = rows[ev[k * 5 + 3]], b = Math.floor(s / w);
      var dur = e - s, ex = ev[k * 5 + 4] === 1 ? dur : 0;
      m = B.bin.length - 1;
      if (m >= 0 && B.bin[m] === b) addToBin(B, m, e, k, 1, dur, ex, dur);
      else pushBin(B, b, s, e, k, k, 1, dur, ex, dur);
    }
    var levels = [{w: w, rows: rows}];
    while (rows.some(function (R) { return R.bin.length > TOP_BINS; })) {
      w *= 2;
      rows = rows.map(function (R) {
        var C = newBins();
        for (var j = 0; j < R.bin.length; j++) {
          var b = R.bin[j] >> 1, q = C.bin.length - 1;
          if (q >= 0 && C.bin[q] === b) {
            addToBin(C, q, R.e[j], R.last[j], R.count[j], R.busy[j], R.exposed[j], R.maxDur[j]);
          } else {
            pushBin(C, b, R.s[j], R.e[j], R.first[j], R.last[j], R.count[j], R.busy[j],
                    R.exposed[j], R.maxDur[j]);
          }
        }
        return C;
      });
      levels.push({w: w, rows: rows});
    }
    return levels;
  }
  // the coarsest level whose bins are under half a merge gap wide, or null: draw every span
  function levelFor(pl, pxPerUs) {
    var levels = pl.levels;
    if (!levels || levels[0].w * pxPerUs > MIN_PX / 2) return null;
    var L = 0;
    while (L + 1 < levels.length && levels[L + 1].w * pxPerUs <= MIN_PX / 2) L++;
    return levels[L];
  }

  function firstBin(bins, b) {
    var lo = 0, hi = bins.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (bins[mid] < b) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  function drawLane(pl, pxPerUs, t0, t1) {
    var g = pl.g, ev = pl.lane.ev, n = ev.length / 5;
    while (g.firstChild) g.removeChild(g.firstChild);
    var pending = [];
    function kindOf(k) { return ev[k * 5 + 4] === 1 ? "exposed" : KINDS[D.nodes.kind[ev[k * 5 + 2]]]; }
    function rect(x, w, row, cls, first, last, count) {
      var attrs = {"class": "ev " + cls, x: x.toFixed(2), y: row * (ROW_H + ROW_GAP),
                   width: Math.max(w, 1).toFixed(2), height: ROW_H,
                   "data-i": first, "data-j": last, "data-n": count};
      if (count === 1) attrs["data-node"] = ev[first * 5 + 2];
      el("rect", attrs, g);
    }
    function flush(row) {
      var a = pending[row];
      if (!a) return;
      pending[row] = null;
      if (a.count === 1) { rect(a.x0, a.x1 - a.x0, row, "k-" + kindOf(a.first), a.first, a.last, 1); return; }
      // a merged run is drawn in the colour of what fills most of it
      var kind = a.exposedUs * 2 > a.busyUs ? "exposed" : kindOf(a.first);
      rect(a.x0, a.x1 - a.x0, row, "agg k-" + kind, a.first, a.last, a.count);
    }
    // spans first..last (count of them, busyUs long, exposedUs of it exposed) from s to e
    function add(s, e, row, first, last, count, busyUs, exposedUs) {
      var x = s * pxPerUs, w = (e - s) * pxPerUs, a = pending[row];
      if (count === 1 && w >= MIN_PX) { flush(row); rect(x, w, row, "k-" + kindOf(first), first, first, 1); return; }
      if (a && x - a.x1 <= MIN_PX && a.x1 - a.x0 < AGG_PX) {
        a.x1 = Math.max(a.x1, x + w); a.last = last; a.count += count;
        a.busyUs += busyUs; a.exposedUs += exposedUs;
      } else {
        flush(row);
        pending[row] = {x0: x, x1: x + w, first: first, last: last, count: count, busyUs: busyUs,
                        exposedUs: exposedUs};
      }
    }
    function addSpan(k) {
      var s = ev[k * 5], e = ev[k * 5 + 1];
      add(s, e, ev[k * 5 + 3], k, k, 1, e - s, ev[k * 5 + 4] === 1 ? e - s : 0);
    }
    var level = levelFor(pl, pxPerUs), r, k;
    if (level !== null) {
      for (r = 0; r < level.rows.length; r++) {
        var B = level.rows[r];
        for (var j = firstBin(B.bin, Math.floor((t0 - pl.maxDur) / level.w)); j < B.bin.length; j++) {
          if (B.s[j] > t1) break;
          if (B.e[j] < t0) continue;
          if (B.maxDur[j] * pxPerUs < MIN_PX && B.s[j] >= t0 && B.e[j] <= t1) {
            add(B.s[j], B.e[j], r, B.first[j], B.last[j], B.count[j], B.busy[j], B.exposed[j]);
            continue;
          }
          // a span wide enough to see, or a bin across an edge of the view: span by span
          for (k = B.first[j]; k <= B.last[j]; k++) {
            if (ev[k * 5 + 3] === r && ev[k * 5] <= t1 && ev[k * 5 + 1] >= t0) addSpan(k);
          }
        }
      }
    } else {
      for (k = lowerBound(ev, t0 - pl.maxDur); k < n; k++) {
        if (ev[k * 5] > t1) break;
        if (ev[k * 5 + 1] < t0) continue;
        addSpan(k);
      }
    }
    for (r = 0; r < pending.length; r++) flush(r);
  }

  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function drawAxis(p, pxPerUs, t0, t1) {
    var a = p.axis;
    while (a.firstChild) a.removeChild(a.firstChild);
    var step = niceStep(100 / pxPerUs);
    for (var t = Math.floor(t0 / step) * step; t <= t1; t += step) {
      var x = (t * pxPerUs).toFixed(1);
      el("line", {"class": "tick", x1: x, x2: x, y1: AXIS_H - 4, y2: p.height}, a);
      var label = el("text", {x: (t * pxPerUs + 2).toFixed(1), y: AXIS_H - 6}, a);
      label.textContent = num(t, step < 1 ? 2 : 0) + " us";
    }
  }

  function drawMemAxis(p, x0) {
    // a byte scale at the visible left edge: 0, half and the peak of both schedules
    var a = p.memAxis, peak = D.mem_peak || 1, top = p.memY + 4, h = MEM_H - 8;
    while (a.firstChild) a.removeChild(a.firstChild);
    [0, 0.5, 1].forEach(function (f) {
      var y = top + h - f * h;
      el("line", {"class": "mem-tick", x1: x0, x2: x0 + 6, y1: y.toFixed(1), y2: y.toFixed(1)}, a);
      var t = el("text", {x: x0 + 8, y: (y + (f === 1 ? 9 : f === 0 ? -1 : 3)).toFixed(1)}, a);
      t.textContent = bytes(f * peak);
    });
  }

  function drawMemory(p, pxPerUs) {
    var mem = p.s.mem, peak = D.mem_peak || 1, pts = [], prevY = null;
    var top = p.memY + 4, h = MEM_H - 8;
    for (var k = 0; k < mem.length; k += 2) {
      var x = (mem[k] * pxPerUs).toFixed(1), y = (top + h - mem[k + 1] / peak * h).toFixed(1);
      if (prevY !== null) pts.push(x + "," + prevY);
      pts.push(x + "," + y);
      prevY = y;
    }
    if (prevY !== null) pts.push((p.s.makespan_us * pxPerUs).toFixed(1) + "," + prevY);
    p.mem.setAttribute("points", pts.join(" "));
  }

  function render(p) {
    var W = fullWidth(), pxPerUs = W / D.span_us;
    p.svg.setAttribute("width", W);
    var x0 = p.scroll.scrollLeft, vw = p.scroll.clientWidth || W;
    var t0 = x0 / pxPerUs, t1 = (x0 + vw) / pxPerUs;
    p.lanes.forEach(function (pl) { pl.bg.setAttribute("width", W); drawLane(pl, pxPerUs, t0, t1); });
    p.memBg.setAttribute("width", W);
    drawAxis(p, pxPerUs, t0, t1);
    drawMemory(p, pxPerUs);
    drawMemAxis(p, x0);
  }

  function zoomText(z) { return (z >= 10 || z === Math.round(z) ? Math.round(z) : z.toFixed(1)) + "x"; }

  function renderAll() {
    panels.forEach(render);
    document.getElementById("zoom").textContent = zoomText(zoom);
    if (found !== null) markFound();
  }

  var pending = false;
  function onScroll(src) {
    if (syncing) return;
    syncing = true;
    panels.forEach(function (p) { if (p !== src) p.scroll.scrollLeft = src.scroll.scrollLeft; });
    syncing = false;
    if (!pending) {
      pending = true;
      window.requestAnimationFrame(function () { pending = false; renderAll(); });
    }
  }

  function setZoom(z, anchorFrac) {
    z = Math.max(1, Math.min(maxZoom(), z));
    var p = panels[0];
    if (!p) return;
    var vw = p.scroll.clientWidth, frac = anchorFrac === undefined ? 0.5 : anchorFrac;
    var at = (p.scroll.scrollLeft + vw * frac) / fullWidth();
    zoom = z;
    panels.forEach(function (q) { q.svg.setAttribute("width", fullWidth()); });
    syncing = true;
    panels.forEach(function (q) { q.scroll.scrollLeft = Math.max(0, at * fullWidth() - vw * frac); });
    syncing = false;
    renderAll();
  }

  // zoom so that [t0, t1] fills about an eighth of the view, centred on it
  function zoomTo(t0, t1) {
    var p = panels[0];
    if (!p) return;
    var span = Math.max(t1 - t0, D.span_us / (maxZoom() * 8), 1e-9);
    zoom = Math.max(1, Math.min(maxZoom(), D.span_us / (span * 8)));
    var W = fullWidth(), vw = p.scroll.clientWidth, x = (t0 + t1) / 2 * W / D.span_us;
    panels.forEach(function (q) { q.svg.setAttribute("width", W); });
    syncing = true;
    panels.forEach(function (q) { q.scroll.scrollLeft = Math.max(0, x - vw / 2); });
    syncing = false;
    renderAll();
  }

  function eventOf(p, t) {
    if (!t.hasAttribute || !t.hasAttribute("data-node")) return null;
    var lane = t.parentNode.getAttribute("data-lane");
    var pl = p.lanes.filter(function (q) { return q.lane.name === lane; })[0];
    var i = +t.getAttribute("data-i");
    return {pl: pl, node: pl.lane.ev[i * 5 + 2], t0: pl.lane.ev[i * 5], t1: pl.lane.ev[i * 5 + 1]};
  }

  function zoomToSpan(p, e) {
    var hit = eventOf(p, e.target);
    if (hit) zoomTo(hit.t0, hit.t1);
  }

  // find a node by name (exact, else the first that contains the text) and zoom to it
  var found = null;
  function markFound() {
    panels.forEach(function (p) {
      var old = p.svg.querySelectorAll("rect.found");
      for (var k = 0; k < old.length; k++) old[k].classList.remove("found");
      var r = p.svg.querySelectorAll('rect[data-node="' + found + '"]');
      for (var m = 0; m < r.length; m++) r[m].classList.add("found");
    });
  }
  function findNode(text) {
    var names = D.nodes.name, node = names.indexOf(text);
    if (node < 0 && text) {
      for (var k = 0; k < names.length; k++) { if (names[k].indexOf(text) >= 0) { node = k; break; } }
    }
    var box = document.getElementById("find");
    box.classList.toggle("missing", node < 0);
    if (node < 0) return false;
    for (var pi = panels.length - 1; pi >= 0; pi--) {
      var lanes = panels[pi].s.lanes;
      for (var li = 0; li < lanes.length; li++) {
        var ev = lanes[li].ev;
        for (var i = 0; i < ev.length; i += 5) {
          if (ev[i + 2] === node) { found = node; zoomTo(ev[i], ev[i + 1]); return true; }
        }
      }
    }
    box.classList.add("missing");
    return false;
  }

  // hovering a collective (or an exposed wait) highlights its partner and draws the link
  // issue (compute) -> collective (its group's lane) -> wait (compute)
  function clearLink() {
    panels.forEach(function (p) {
      while (p.linkLayer.firstChild) p.linkLayer.removeChild(p.linkLayer.firstChild);
      var lit = p.svg.querySelectorAll("rect.linked");
      for (var k = 0; k < lit.length; k++) lit[k].classList.remove("linked");
    });
  }
  function showLink(p, e) {
    clearLink();
    var hit = eventOf(p, e.target);
    if (!hit || !(hit.node in p.linkOf)) return;
    var L = p.s.links, k = p.linkOf[hit.node], coll = L[k], wait = L[k + 1];
    var pxPerUs = fullWidth() / D.span_us, cy = p.lanes[0].y + ROW_H / 2, gy = cy;
    var laneName = "comm:" + D.nodes.group[coll];
    p.lanes.forEach(function (pl) {
      if (pl.lane.name !== laneName) return;
      gy = pl.y + ROW_H / 2;
      var r = pl.g.querySelector('rect[data-node="' + coll + '"]');
      if (r) { r.classList.add("linked"); gy = pl.y + +r.getAttribute("y") + ROW_H / 2; }
    });
    if (wait >= 0) {
      var w = p.lanes[0].g.querySelector('rect[data-node="' + wait + '"]');
      if (w) w.classList.add("linked");
    }
    var pts = [[L[k + 2], cy], [L[k + 3], gy], [L[k + 4], gy]];
    if (L[k + 5] >= 0) pts.push([Math.max(L[k + 5], L[k + 4]), cy]);
    el("polyline", {"class": "link", "data-collective": coll, points: pts.map(function (q) {
      return (q[0] * pxPerUs).toFixed(1) + "," + q[1].toFixed(1);
    }).join(" ")}, p.linkLayer);
    pts.forEach(function (q) {
      el("circle", {"class": "link-end", cx: (q[0] * pxPerUs).toFixed(1), cy: q[1].toFixed(1), r: 3},
         p.linkLayer);
    });
  }

  // drag the timeline to pan it
  var drag = null;
  function startDrag(p, e) {
    if (e.button !== 0 || e.target === p.scroll) return;  // not the native scrollbar
    drag = {p: p, x: e.clientX, left: p.scroll.scrollLeft, moved: false};
    document.body.classList.add("dragging");
  }
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var dx = e.clientX - drag.x;
    if (Math.abs(dx) > 2) drag.moved = true;
    if (drag.moved) { drag.p.scroll.scrollLeft = drag.left - dx; tip.style.display = "none"; }
  });
  window.addEventListener("mouseup", function () {
    drag = null;
    document.body.classList.remove("dragging");
  });

  function onWheel(e) {
    if (!e.ctrlKey && !e.metaKey) return;
    e.preventDefault();
    var box = e.currentTarget.getBoundingClientRect();
    setZoom(e.deltaY < 0 ? zoom * 2 : zoom / 2, (e.clientX - box.left) / box.width);
  }

  function groupTitle(p, group) {
    var pl = p.lanes.filter(function (q) { return q.lane.name === "comm:" + group; })[0];
    return pl ? pl.lane.title + ", c10d group " + group : group;
  }

  function showTip(p, e) {
    var t = e.target;
    if (!t.hasAttribute || !t.hasAttribute("data-i")) { tip.style.display = "none"; return; }
    var lane = t.parentNode.getAttribute("data-lane");
    var pl = p.lanes.filter(function (q) { return q.lane.name === lane; })[0];
    var ev = pl.lane.ev, i = +t.getAttribute("data-i"), j = +t.getAttribute("data-j");
    var n = +t.getAttribute("data-n"), N = D.nodes, text;
    if (n === 1) {
      var node = ev[i * 5 + 2], dur = ev[i * 5 + 1] - ev[i * 5];
      text = N.name[node] + "\n" + D.ops[N.op[node]] + " (" + KINDS[N.kind[node]] + ")" +
        (ev[i * 5 + 4] === 1 ? "\nexposed: compute idle " + us(dur) : "\nduration " + us(dur)) +
        "\n" + us(ev[i * 5]) + " to " + us(ev[i * 5 + 1]) + "\nbytes " + bytes(N.bytes[node]) +
        (N.group[node] ? "\ngroup " + groupTitle(p, N.group[node]) : "");
    } else {
      var busy = 0, exposed = 0;
      for (var k = i; k <= j; k++) {
        busy += ev[k * 5 + 1] - ev[k * 5];
        if (ev[k * 5 + 4] === 1) exposed += ev[k * 5 + 1] - ev[k * 5];
      }
      text = n + " short spans merged (zoom in to see each)\n" + N.name[ev[i * 5 + 2]] +
        " ... " + N.name[ev[j * 5 + 2]] + "\nbusy " + us(busy - exposed) +
        (exposed > 0 ? ", exposed waits " + us(exposed) : "") + "\nfrom " + us(ev[i * 5]) +
        " to " + us(ev[j * 5 + 1]);
    }
    tip.textContent = text;
    tip.style.display = "block";
    moveTip(e);
  }
  function moveTip(e) {
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 430) + "px";
    tip.style.top = (e.clientY + 14) + "px";
  }

  document.getElementById("zoom-in").addEventListener("click", function () { setZoom(zoom * 2); });
  document.getElementById("zoom-out").addEventListener("click", function () { setZoom(zoom / 2); });
  document.getElementById("zoom-fit").addEventListener("click", function () { setZoom(1); });
  document.getElementById("find").addEventListener("keydown", function (e) {
    if (e.key === "Enter") findNode(e.target.value.trim());
  });
  window.addEventListener("resize", renderAll);
  setup();
  renderAll();
  document.body.setAttribute("data-ready", "1");
}());
