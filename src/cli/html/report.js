/* report.js - draws a `cumemtrace html` page from the JSON model in
 * #cmt-data (its shape: src/cli/html_model.c).  Plain DOM and SVG, no
 * library: a flame graph is rectangles and a timeline is stacked step
 * areas, both simpler written than bent out of a charting package.
 * window.cumemtrace exposes the model and the views for tests. */
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('cmt-data').textContent);
  var FR = D.frames;
  var NS = 'http://www.w3.org/2000/svg';
  var main = document.getElementById('main');
  var tip = document.getElementById('tip');
  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948',
                 '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
  var OTHER = '#d0d7de';

  function h(tag, attrs, parent, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function s(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function bytes(b) {
    if (b == null) return '?';
    var neg = b < 0, v = Math.abs(b), u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'], i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    var t = i === 0 ? v + ' B' : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2) + ' ' + u[i];
    return (neg ? '-' : '') + t;
  }
  function sbytes(b) { return (b > 0 ? '+' : '') + bytes(b); }
  function dur(ns) {
    if (ns == null) return '?';
    if (ns < 1e3) return ns + ' ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + ' \u00b5s';
    if (ns < 1e9) return (ns / 1e6).toFixed(1) + ' ms';
    return (ns / 1e9).toFixed(2) + ' s';
  }
  function color(site) { return site < 0 ? OTHER : PALETTE[site % PALETTE.length]; }
  function showTip(ev, text) {
    tip.textContent = text;
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + 420 > window.innerWidth) x = Math.max(0, ev.clientX - 430);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  function hideTip() { tip.hidden = true; }
  function widthOf(e) { return Math.max(480, Math.min(1400, e.clientWidth - 28)); }
  function procName(f) {
    return (f.exe || '?') + ' pid ' + f.pid + (f.rank != null ? ' rank ' + f.rank : '');
  }
  /* Python frames of a stack, innermost first, as "file:line function". */
  function stackLines(file, st, max) {
    var sk = stack(file, st);
    if (!sk) return [];
    var out = [], fr = sk[1];
    for (var i = 0; i < fr.length && out.length < max; i++)
      if (FR[fr[i]][1] === 1) out.push('  ' + FR[fr[i]][0]);
    return out;
  }
  /* The model's site table is by column (html_model.c write_sites). */
  function siteCount(file) { return file.sites.stack.length; }
  function siteLabel(file, i) { return file.labels[file.sites.label[i]]; }
  function siteStack(file, i) { return file.sites.stack[i]; }
  function site(file, i) {
    var c = file.sites;
    return { label: siteLabel(file, i), stack: c.stack[i], at_peak: c.at_peak[i], live: c.live[i],
             oom: c.oom[i], allocs: c.allocs ? c.allocs[i] : null, frees: c.frees ? c.frees[i] : null,
             alloc_bytes: c.alloc_bytes ? c.alloc_bytes[i] : null, kinds: c.kinds[i] };
  }
  /* ---------------- the model, unpacked ---------------- */

  var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/', DIGIT = [];
  for (var di = 0; di < 64; di++) DIGIT[B64.charCodeAt(di)] = di;
  /* A file's stacks stay one base-64 string (html_model.c write_stacks):
   * a frame is decoded where it is read, by stepKey for the flame graph and
   * by stack() for the few stacks a view prints, never all 2 million of a
   * 100 000-stack file at once.  Entry points get their flame-graph key. */
  var ENTRY_ID = new Map(), ENTRY_NAME = [];
  function entryKey(name) {
    var id = ENTRY_ID.get(name);
    if (id === undefined) { id = ENTRY_NAME.length; ENTRY_NAME.push(name); ENTRY_ID.set(name, id); }
    return -2 - id;
  }
  function stacksOf(file) {
    if (file.decoded) return file.decoded;
    var len = file.stack_len, n = len.length, off = new Int32Array(n + 1), tot = 0, i;
    for (i = 0; i < n; i++) { off[i] = tot; tot += len[i]; }
    off[n] = tot;
    var keys = file.stack_entries.map(entryKey), ent = new Int32Array(n);
    for (i = 0; i < n; i++) ent[i] = keys[file.stack_entry[i]];
    file.decoded = { n: n, off: off, ent: ent, str: file.stack_frames, w: file.frame_width };
    return file.decoded;
  }
  function frameAt(S, k) {
    for (var v = 0, c = k * S.w, e = c + S.w; c < e; c++) v = v * 64 + DIGIT[S.str.charCodeAt(c)];
    return v;
  }
  /* [entry point, frame indices innermost first], or null for no stack. */
  function stack(file, st) {
    if (st == null || st < 0 || st >= file.stack_len.length) return null;
    var S = stacksOf(file), a = S.off[st], fr = new Array(S.off[st + 1] - a);
    for (var i = 0; i < fr.length; i++) fr[i] = frameAt(S, a + i);
    return [file.stack_entries[file.stack_entry[st]], fr];
  }
  /* The callers of a stack's label frame, as report.c's report_callers
   * prints them: the frame that names the site is the innermost Python
   * frame, else the innermost named one, else the innermost non-marker;
   * unnamed native frames and process start-up are skipped. */
  function startup(f) { return /^(libc\.so|ld-linux)/.test(f[2]) || /!_start$/.test(f[2]); }
  function callers(file, st, max) {
    var sk = stack(file, st);
    if (!sk) return '';
    var fr = sk[1], pos = -1, i;
    for (i = 0; i < fr.length && pos < 0; i++) if (FR[fr[i]][1] === 1) pos = i;
    for (i = 0; i < fr.length && pos < 0; i++) if (FR[fr[i]][3]) pos = i;
    for (i = 0; i < fr.length && pos < 0; i++) if (FR[fr[i]][1] !== 2) pos = i;
    if (pos < 0) return '';
    var out = [];
    for (i = pos + 1; i < fr.length && out.length < max; i++) {
      var f = FR[fr[i]];
      if (f[1] === 0 && (!f[3] || startup(f))) continue;
      out.push('< ' + f[0]);
    }
    return out.join(' ');
  }
  /* Worked out for the rows and bands drawn, not for all 100 000 sites. */
  function siteCallers(file, i) {
    var c = file.callers || (file.callers = []);
    if (c[i] == null) c[i] = callers(file, siteStack(file, i), 4);
    return c[i];
  }
  performance.mark('cmt-parsed');

  function section(id, title) {
    var sec = h('section', { id: id }, main);
    h('h2', {}, sec, title);
    return sec;
  }

  /* ---------------- timeline ---------------- */

  /* One device's memory over time: stacked step areas of its top call sites
   * (the model's bands) and "other" up to the exact total.  Drag to zoom,
   * double-click to reset.  opts.domain shares a time axis (diff). */
  function timelineChart(parent, file, dev, opts) {
    opts = opts || {};
    var W = widthOf(parent), H = opts.height || 240, ml = 64, mr = 12, mt = 10, mb = 26;
    var pts = dev.points, nb = dev.bands.length;
    /* Start where the log starts (the model's first point is the zero at
     * process start), with a little room. */
    var t0 = pts.length > 1 ? pts[1][0] : 0, pad = (dev.end_ns - t0) * 0.02;
    var full = opts.domain || [Math.max(0, t0 - pad), dev.end_ns];
    var dom = full.slice();
    var box = h('div', { 'class': 'tl', 'data-device': dev.name }, parent);
    var svgEl = s('svg', { width: W, height: H, 'class': 'timeline-svg' }, box);
    var ymax = dev.peak;
    for (var i = 0; i < pts.length; i++) if (pts[i][1] > ymax) ymax = pts[i][1];
    if (opts.ymax && opts.ymax > ymax) ymax = opts.ymax;
    if (ymax <= 0) ymax = 1;
    var px = function (t) { return ml + (t - dom[0]) / (dom[1] - dom[0] || 1) * (W - ml - mr); };
    var py = function (v) { return mt + (1 - v / ymax) * (H - mt - mb); };
    /* layers[k][j] = [lower, upper] of band j (nb = other) at point k */
    var layers = pts.map(function (p) {
      var acc = 0, out = [];
      for (var j = 0; j < nb; j++) {
        var v = Math.max(0, p[2 + j]);
        if (acc + v > p[1]) v = Math.max(0, p[1] - acc);
        out.push([acc, acc + v]);
        acc += v;
      }
      out.push([acc, Math.max(acc, p[1])]);
      return out;
    });
    function draw() {
      while (svgEl.firstChild) svgEl.removeChild(svgEl.firstChild);
      var gAxis = s('g', { 'class': 'axis' }, svgEl);
      for (var q = 0; q <= 4; q++) {
        var v = ymax * q / 4, y = py(v);
        s('line', { x1: ml, x2: W - mr, y1: y, y2: y, 'class': 'grid' }, gAxis);
        s('text', { x: ml - 6, y: y + 4, 'text-anchor': 'end' }, gAxis, bytes(Math.round(v)));
      }
      for (q = 0; q <= 5; q++) {
        var t = dom[0] + (dom[1] - dom[0]) * q / 5;
        s('text', { x: px(t), y: H - 8, 'text-anchor': q === 0 ? 'start' : q === 5 ? 'end' : 'middle' },
          gAxis, dur(Math.round(t)));
      }
      var clipId = 'clip' + Math.random().toString(36).slice(2);
      var cp = s('clipPath', { id: clipId }, svgEl);
      s('rect', { x: ml, y: 0, width: W - ml - mr, height: H }, cp);
      var g = s('g', { 'clip-path': 'url(#' + clipId + ')' }, svgEl);
      for (var j = 0; j <= nb; j++) {
        var up = '', lo = [];
        for (var k = 0; k < pts.length; k++) {
          var x0 = px(pts[k][0]), x1 = k + 1 < pts.length ? px(pts[k + 1][0]) : px(dom[1]);
          var L = layers[k][j];
          up += (k ? 'L' : 'M') + x0.toFixed(1) + ',' + py(L[1]).toFixed(1) + 'L' + x1.toFixed(1) + ',' + py(L[1]).toFixed(1);
          lo.push('L' + x1.toFixed(1) + ',' + py(L[0]).toFixed(1) + 'L' + x0.toFixed(1) + ',' + py(L[0]).toFixed(1));
        }
        var si = j < nb ? dev.bands[j] : -1;
        var label = j < nb ? siteLabel(file, si) : (nb ? 'other call sites' : 'total');
        s('path', { d: up + lo.reverse().join('') + 'Z', fill: j < nb ? color(si) : (nb ? OTHER : '#4e79a7'),
                    'class': 'band', 'data-band': j, 'data-site': label }, g);
      }
      if (dev.peak_ns != null) {
        var xp = px(dev.peak_ns);
        s('line', { x1: xp, x2: xp, y1: mt, y2: H - mb, 'class': 'mark-peak' }, g);
        s('text', { x: xp + 4, y: mt + 10, fill: '#cf222e' }, g, 'peak ' + bytes(dev.peak));
      }
      (file.attempts || []).forEach(function (a) {
        if (a[1] !== dev.ordinal) return;
        var x = px(a[0]);
        s('line', { x1: x, x2: x, y1: H - mb - 14, y2: H - mb, 'class': a[5] === 'recovered' ? 'mark-ok' : 'mark-fail',
                    'data-outcome': a[5] }, g);
      });
      if (file.oom && file.oom.device === dev.ordinal && file.oom.time_ns != null) {
        var xo = px(file.oom.time_ns);
        s('line', { x1: xo, x2: xo, y1: mt, y2: H - mb, 'class': 'mark-fail', 'data-mark': 'oom' }, g);
        s('text', { x: xo - 4, y: mt + 24, fill: '#cf222e', 'text-anchor': 'end' }, g,
          'OOM: ' + bytes(file.oom.requested) + ' refused');
      }
      s('rect', { x: ml, y: mt, width: W - ml - mr, height: H - mt - mb, fill: 'transparent', 'class': 'hit' }, svgEl);
    }
    function at(ev) {
      var r = svgEl.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
      var t = dom[0] + (x - ml) / (W - ml - mr) * (dom[1] - dom[0]);
      var v = (1 - (y - mt) / (H - mt - mb)) * ymax;
      var lo = 0, hi = pts.length - 1;
      while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (pts[mid][0] <= t) lo = mid; else hi = mid - 1; }
      return { x: x, t: t, v: v, k: lo };
    }
    var drag = null, brush = null;
    svgEl.addEventListener('mousemove', function (ev) {
      var a = at(ev);
      if (drag != null) {
        var x0 = Math.min(drag, a.x), x1 = Math.max(drag, a.x);
        if (!brush) brush = s('rect', { y: mt, height: H - mt - mb, 'class': 'brush' }, svgEl);
        brush.setAttribute('x', x0); brush.setAttribute('width', x1 - x0);
        return;
      }
      var L = layers[a.k], band = -1;
      for (var j = 0; j < L.length; j++) if (a.v >= L[j][0] && a.v < L[j][1]) band = j;
      var paths = svgEl.querySelectorAll('path.band');
      for (var q = 0; q < paths.length; q++) paths[q].classList.toggle('hl', +paths[q].getAttribute('data-band') === band);
      var p = pts[a.k], lines = [dev.name + ' at ' + dur(Math.round(a.t)) + ': total ' + bytes(p[1])];
      if (band >= 0 && band < nb) {
        var st = site(file, dev.bands[band]);
        lines.push(st.label + '  ' + bytes(L[band][1] - L[band][0]));
        var cl = siteCallers(file, dev.bands[band]);
        if (cl) lines.push('  ' + cl);
        lines = lines.concat(stackLines(file, st.stack, 6));
      } else if (band === nb) {
        lines.push((nb ? 'other call sites  ' : 'total  ') + bytes(L[band][1] - L[band][0]));
        if (file.thinned) lines.push('(the event log was thinned: no per-site split)');
      }
      showTip(ev, lines.join('\n'));
    });
    svgEl.addEventListener('mouseleave', function () { hideTip(); });
    svgEl.addEventListener('mousedown', function (ev) { drag = at(ev).x; ev.preventDefault(); });
    svgEl.addEventListener('mouseup', function (ev) {
      var x1 = at(ev).x, x0 = drag;
      drag = null;
      if (brush) { brush.remove(); brush = null; }
      if (x0 == null || Math.abs(x1 - x0) < 4) return;
      var a = Math.min(x0, x1), b = Math.max(x0, x1);
      var t0 = dom[0] + (a - ml) / (W - ml - mr) * (dom[1] - dom[0]);
      var t1 = dom[0] + (b - ml) / (W - ml - mr) * (dom[1] - dom[0]);
      dom = [Math.max(full[0], t0), Math.min(full[1], t1)];
      draw();
    });
    svgEl.addEventListener('dblclick', function () { dom = full.slice(); draw(); });
    draw();
    return { svg: svgEl, domain: function () { return dom.slice(); } };
  }

  function legend(parent, file, dev) {
    var lg = h('div', { 'class': 'legend' }, parent);
    dev.bands.forEach(function (si) {
      var it = h('span', {}, lg);
      h('span', { 'class': 'sw', style: 'background:' + color(si) }, it);
      /* sites may share a label (one allocator function): the first
       * caller tells them apart */
      var c = siteCallers(file, si), first = c ? c.split(' < ')[0].replace(/^< /, '') : '';
      it.appendChild(document.createTextNode(siteLabel(file, si) + (first ? ' < ' + first : '')));
    });
    if (dev.bands.length) {
      var it = h('span', {}, lg);
      h('span', { 'class': 'sw', style: 'background:' + OTHER }, it);
      it.appendChild(document.createTextNode('other call sites'));
    }
  }

  function drawTimeline(file) {
    var sec = section('timeline', 'Memory over time');
    h('p', { 'class': 'note' }, sec, 'Stacked by the call sites that held the most at each device\'s peak. ' +
      'Hover for the call site, drag to zoom, double-click to reset. Red ticks: failed allocations; green: recoveries.');
    if (file.thinned)
      h('p', { 'class': 'note' }, sec, 'The event log was thinned (' + file.events_kept + ' of ' + file.events_recorded +
        ' events kept): the total is exact, the split by call site cannot be rebuilt and is not drawn.');
    if (!file.devices.length) h('p', {}, sec, 'No device memory was tracked in this file.');
    file.devices.forEach(function (dev) {
      h('h3', {}, sec, dev.name + ': peak ' + bytes(dev.peak) + ' at ' + dur(dev.peak_ns) + ', at the dump ' + bytes(dev.current));
      legend(sec, file, dev);
      timelineChart(sec, file, dev);
    });
  }

  /* ---------------- flame graph ---------------- */

  /* The icicle is built as it is drawn: a node keeps the groups (stack,
   * bytes) that pass through it and shares them out among its children
   * only when it is laid out wide enough to show them.  A 100 000-stack
   * snapshot has millions of nodes, nearly all narrower than a pixel and
   * never built; the model counts them (html_flame.c).  A step's key is its
   * frame index (equal names share an index, so stacks merge as `cumemtrace
   * flamegraph` merges its lines), -1 for "[no stack]", -2 - id for an
   * entry point.  Steps of a stack run outermost first: its frames, then
   * its entry point. */
  function stepCount(S, st) { return st < 0 ? 1 : S.off[st + 1] - S.off[st] + 1; }
  function stepKey(S, st, j) {
    if (st < 0) return -1;
    var end = S.off[st + 1];
    return j < end - S.off[st] ? frameAt(S, end - 1 - j) : S.ent[st];
  }
  function node(key, parent, name, type) {
    if (name == null) {
      name = key >= 0 ? FR[key][0] : key === -1 ? '[no stack]' : ENTRY_NAME[-2 - key];
      type = key >= 0 ? FR[key][1] : key === -1 ? 2 : 3;
    }
    return { name: name, type: type, value: 0, base: 0, parent: parent, j: 0, items: null,
             bitems: null, devs: null, list: null };
  }
  function items(S) { return { S: S, st: [], b: [] }; }
  /* Adds file's groups of one device and mode to n (its base side for a
   * diff); the depth they reach below n goes into root.depth. */
  function addGroups(root, n, file, g, isBase, below) {
    var S = stacksOf(file), it = isBase ? (n.bitems || (n.bitems = items(S))) : (n.items || (n.items = items(S)));
    for (var i = 0; i < g.length; i++) {
      var st = g[i][0], v = g[i][1];
      if (!v) continue;
      if (st == null || st < 0 || st >= S.n) st = -1;
      it.st.push(st);
      it.b.push(v);
      if (isBase) { root.base += v; if (n !== root) n.base += v; continue; }
      root.value += v;
      if (n !== root) n.value += v;
      var d = stepCount(S, st) + below;
      if (d > root.depth) root.depth = d;
    }
  }
  function buildTree(file, mode, into, isBase) {
    var root = into;
    if (!root) { root = node(null, null, 'all', 4); root.depth = 0; root.count = file.flame_nodes[mode] || 1; }
    /* device memory only, as `cumemtrace flamegraph`: pinned host memory
     * is not what runs out on the GPU */
    var devs = file.devices.filter(function (d) { return d.ordinal >= 0 && d.groups[mode]; });
    devs.forEach(function (d) {
      var top = root;
      if (devs.length > 1) {
        if (!root.devs) root.devs = new Map();
        top = root.devs.get(d.name);
        if (!top) {
          if (isBase) return; /* gone from the new file: no width, not drawn */
          root.devs.set(d.name, top = node(null, root, d.name, 4));
        }
      }
      addGroups(root, top, file, d.groups[mode], isBase, top !== root ? 1 : 0);
    });
    return root;
  }
  function share(n, it, isBase, map, list) {
    for (var i = 0; i < it.st.length; i++) {
      var st = it.st[i];
      if (n.j >= stepCount(it.S, st)) continue;
      var k = stepKey(it.S, st, n.j), c = map.get(k);
      if (!c) {
        if (isBase) continue; /* gone from the new file: no width, not drawn */
        map.set(k, c = node(k, n));
        c.j = n.j + 1;
        list.push(c);
      }
      var dst = isBase ? (c.bitems || (c.bitems = items(it.S))) : (c.items || (c.items = items(it.S)));
      dst.st.push(st);
      dst.b.push(it.b[i]);
      if (isBase) c.base += it.b[i]; else c.value += it.b[i];
    }
  }
  function kidsOf(n) {
    if (!n.list) {
      var list = [], map = new Map();
      if (n.devs) n.devs.forEach(function (c) { list.push(c); });
      else {
        if (n.items) share(n, n.items, false, map, list);
        if (n.bitems) share(n, n.bitems, true, map, list);
      }
      n.items = n.bitems = null;
      n.list = list.filter(function (c) { return c.value > 0; });
      n.list.sort(function (a, b) { return b.value - a.value || (a.name < b.name ? -1 : 1); });
    }
    return n.list;
  }
  var TYPE_FILL = {
    0: function (h2) { return 'hsl(' + (20 + h2 * 25) + ',80%,' + (60 + h2 * 8) + '%)'; },
    1: function (h2) { return 'hsl(' + (165 + h2 * 25) + ',55%,' + (48 + h2 * 10) + '%)'; },
    2: function () { return '#c5cbd3'; },
    3: function () { return '#e5534b'; },
    4: function () { return '#9aa4b2'; }
  };
  function hash(str) { var x = 0; for (var i = 0; i < str.length; i++) x = (x * 31 + str.charCodeAt(i)) | 0; return ((x >>> 0) % 1000) / 1000; }

  /* An icicle (root on top), or with opts.flip a flame graph (root at the
   * bottom): width = bytes.  Click zooms, the search box highlights
   * matches.  With diff, colour says grown (red) or shrunk (blue) from the
   * base. */
  function flameChart(parent, root, opts) {
    opts = opts || {};
    var W = widthOf(parent), RH = 18, minW = 0.5;
    var depth = root.depth;
    var box = h('div', { 'class': 'fg-box' }, parent);
    var svgEl = s('svg', { width: W, height: (depth + 1) * RH + 4, 'class': 'fg', 'data-nodes': root.count }, box);
    var focus = root, query = '', flip = !!opts.flip;
    function rowY(d) { return (flip ? depth - d : d) * RH; }
    /* diff colours scale to the largest change among the frames drawn */
    var maxDelta = 1;
    function fill(n) {
      if (opts.diff) {
        var dlt = n.value - n.base, a = Math.min(1, Math.abs(dlt) / maxDelta);
        if (dlt === 0) return '#e6e8eb';
        return dlt > 0 ? 'rgb(255,' + Math.round(230 - 190 * a) + ',' + Math.round(230 - 190 * a) + ')'
                       : 'rgb(' + Math.round(230 - 190 * a) + ',' + Math.round(230 - 150 * a) + ',255)';
      }
      return TYPE_FILL[n.type](hash(n.name));
    }
    /* One listener per event for the whole graph, not three per rectangle. */
    var nodes = [];
    function hit(ev) {
      var g = ev.target.closest ? ev.target.closest('g[data-i]') : null;
      return g ? nodes[+g.getAttribute('data-i')] : null;
    }
    svgEl.addEventListener('click', function (ev) { var n = hit(ev); if (n) { focus = n; draw(); } });
    svgEl.addEventListener('mousemove', function (ev) {
      var n = hit(ev);
      if (!n) { hideTip(); return; }
      var t = n.name + '\n' + bytes(n.value) + ' (' + (100 * n.value / (root.value || 1)).toFixed(1) + '% of ' + bytes(root.value) + ')';
      if (opts.diff) t += '\nbase ' + bytes(n.base) + ', change ' + sbytes(n.value - n.base);
      showTip(ev, t);
    });
    svgEl.addEventListener('mouseleave', hideTip);
    function draw() {
      while (svgEl.firstChild) svgEl.removeChild(svgEl.firstChild);
      nodes = [];
      var drawn = 0, matched = 0;
      var re = query.toLowerCase();
      /* ancestors of the focus span the full width */
      var chain = [], a = focus;
      while (a) { chain.unshift(a); a = a.parent; }
      function rect(n, x, w, d) {
        if (w < minW) return;
        var g = s('g', { 'data-i': nodes.length }, svgEl);
        nodes.push(n);
        var r = s('rect', { x: x.toFixed(2), y: rowY(d), width: Math.max(0.1, w - 0.5).toFixed(2), height: RH - 1,
                            fill: fill(n), 'data-name': n.name, 'data-type': n.type, 'data-bytes': n.value }, g);
        if (re && n.name.toLowerCase().indexOf(re) >= 0) { r.classList.add('match'); matched++; }
        if (w > 40) {
          var maxc = Math.floor((w - 6) / 6.5);
          s('text', { x: x + 3, y: rowY(d) + 13 }, g, n.name.length > maxc ? n.name.slice(0, Math.max(1, maxc - 1)) + '\u2026' : n.name);
        }
        drawn++;
      }
      /* laid out first, drawn second: a diff's colours need the largest
       * change among the frames drawn */
      var todo = [];
      for (var i = 0; i < chain.length - 1; i++) todo.push([chain[i], 0, W, i]);
      (function lay(n, x, w, d) {
        if (w < minW) return;
        todo.push([n, x, w, d]);
        var cx = x;
        kidsOf(n).forEach(function (c) {
          var cw = w * c.value / (n.value || 1);
          lay(c, cx, cw, d + 1);
          cx += cw;
        });
      })(focus, 0, W, chain.length - 1);
      maxDelta = 1;
      if (opts.diff) todo.forEach(function (e) { maxDelta = Math.max(maxDelta, Math.abs(e[0].value - e[0].base)); });
      todo.forEach(function (e) { rect(e[0], e[1], e[2], e[3]); });
      svgEl.setAttribute('data-drawn', drawn);
      svgEl.setAttribute('data-hidden', root.count - drawn); /* narrower than minW, or below one */
      svgEl.setAttribute('data-matched', matched);
    }
    draw();
    return {
      svg: svgEl,
      search: function (q) { query = q; draw(); },
      flip: function (f) { flip = f; draw(); },
      reset: function () { focus = root; draw(); }
    };
  }

  function drawFlame(file, diffBase) {
    var sec = section('flamegraph', diffBase ? 'Differential flame graph' : 'Flame graph');
    var modes = [['peak', 'at the peak'], ['live', 'live at the dump']];
    if (file.oom) modes.push(['oom', 'at the OOM']);
    var ctl = h('div', { 'class': 'controls' }, sec);
    var holder = h('div', {}, sec);
    var search = h('input', { type: 'search', placeholder: 'highlight frames matching\u2026', id: 'fg-search', size: 30 });
    var info = h('span', { 'class': 'note' });
    var chart = null, mode = 'peak', flip = false;
    function render() {
      holder.textContent = '';
      var root = buildTree(file, mode);
      if (diffBase) buildTree(diffBase, mode, root, true);
      if (!root.value) { h('p', { 'class': 'note' }, holder, 'Nothing held ' + modes.filter(function (m) { return m[0] === mode; })[0][1] + '.'); chart = null; return; }
      h('p', { 'class': 'note' }, holder, bytes(root.value) + ' held ' +
        modes.filter(function (m) { return m[0] === mode; })[0][1] + '. ' +
        (diffBase ? 'Width: bytes in the new file; red grew, blue shrank since the base (call sites gone from the new file have no width).'
                  : 'Python frames green-blue, native frames orange, CUDA entry points red. Click a frame to zoom, click a frame nearer the root to zoom out.'));
      chart = flameChart(holder, root, { diff: !!diffBase, flip: flip });
      if (search.value) chart.search(search.value);
      api.flame = chart;
    }
    modes.forEach(function (m) {
      var b = h('button', { type: 'button', 'data-mode': m[0] }, ctl, m[1]);
      b.addEventListener('click', function () {
        mode = m[0];
        ctl.querySelectorAll('button').forEach(function (x) { x.classList.toggle('on', x === b); });
        render();
      });
      if (m[0] === mode) b.classList.add('on');
    });
    var fl = h('label', { 'class': 'note' }, ctl);
    var flipBox = h('input', { type: 'checkbox', id: 'fg-flip' }, fl);
    fl.appendChild(document.createTextNode(' flame (root at the bottom) '));
    flipBox.addEventListener('change', function () { flip = flipBox.checked; if (chart) chart.flip(flip); });
    ctl.appendChild(search);
    ctl.appendChild(info);
    search.addEventListener('input', function () {
      if (!chart) return;
      chart.search(search.value);
      info.textContent = search.value ? chart.svg.getAttribute('data-matched') + ' frames match' : '';
    });
    render();
  }

  /* ---------------- call sites ---------------- */

  function drawSites(file) {
    var sec = section('sites', 'Call sites');
    var cols = [['label', 'call site', 'l'], ['at_peak', 'at peak'], ['live', 'live at dump']];
    if (file.oom) cols.push(['oom', 'at OOM']);
    cols.push(['allocs', 'allocations'], ['frees', 'frees'], ['alloc_bytes', 'allocated in total']);
    if (!file.counted) h('p', { 'class': 'note' }, sec, 'The event log was thinned: allocation and free counts are unknown (?).');
    var n = siteCount(file), rows = null, LIMIT = 500;
    /* every row, made for the first sort only */
    function allRows() {
      if (!rows) {
        rows = new Array(n);
        for (var i = 0; i < n; i++) { rows[i] = site(file, i); rows[i].i = i; }
      }
      return rows;
    }
    if (n > LIMIT) h('p', { 'class': 'note' }, sec, 'Showing the first ' + LIMIT + ' of ' + n + ' call sites in the chosen order.');
    var table = h('table', { id: 'sites-table' }, sec);
    var thead = h('thead', {}, table), tr = h('tr', {}, thead), tbody = h('tbody', {}, table);
    var view = h('div', { 'class': 'stackview', id: 'stackview', hidden: '' }, sec);
    /* The model lists the sites largest at the peak first (html_model.c),
     * the order of the first drawing: no sort of 100 000 rows before it. */
    var key = 'at_peak', asc = false, inModelOrder = true;
    function render() {
      if (!inModelOrder) allRows().sort(function (a, b) {
        var x = a[key], y = b[key], c;
        if (key === 'label') c = x < y ? -1 : x > y ? 1 : 0;
        else c = (x == null ? -1 : x) - (y == null ? -1 : y);
        if (!asc) c = -c;
        return c || a.i - b.i;
      });
      inModelOrder = false;
      tr.querySelectorAll('th').forEach(function (th) {
        th.classList.toggle('sorted', th.getAttribute('data-key') === key);
        th.classList.toggle('asc', th.getAttribute('data-key') === key && asc);
      });
      tbody.textContent = '';
      var shown = [];
      if (rows) shown = rows.slice(0, LIMIT);
      else for (var i = 0; i < n && i < LIMIT; i++) { shown.push(site(file, i)); shown[i].i = i; }
      shown.forEach(function (r) {
        var row = h('tr', { 'data-site': r.i }, tbody);
        var td = h('td', { 'class': 'l' }, row);
        h('span', { 'class': 'sw', style: 'display:inline-block;width:9px;height:9px;margin-right:5px;background:' + color(r.i) }, td);
        var a = h('a', { href: '#stack-' + r.i }, td, r.label);
        a.addEventListener('click', function (ev) { ev.preventDefault(); showStack(r, row); });
        var cl = siteCallers(file, r.i);
        if (cl) h('div', { 'class': 'callers' }, td, cl);
        cols.slice(1).forEach(function (c) {
          var v = r[c[0]];
          h('td', {}, row, v == null ? '?' : /bytes|peak|live|oom/.test(c[0]) ? bytes(v) : String(v));
        });
      });
    }
    function showStack(r, row) {
      tbody.querySelectorAll('tr.sel').forEach(function (x) { x.classList.remove('sel'); });
      row.classList.add('sel');
      view.hidden = false;
      view.textContent = '';
      h('div', {}, view, r.label + ' - stack, innermost first:');
      if (r.stack < 0) { h('div', {}, view, '(no stack recorded)'); return; }
      var st = stack(file, r.stack);
      h('div', {}, view, '  ' + st[0]);
      st[1].forEach(function (f) {
        h('div', { 'class': FR[f][1] === 1 ? 'py' : FR[f][1] === 2 ? 'marker' : '' }, view, '  ' + FR[f][0]);
      });
    }
    cols.forEach(function (c) {
      var th = h('th', { 'data-key': c[0], 'class': c[2] || '' }, tr, c[1]);
      th.addEventListener('click', function () {
        if (key === c[0]) asc = !asc; else { key = c[0]; asc = c[0] === 'label'; }
        render();
      });
    });
    render();
  }

  /* ---------------- post-mortem ---------------- */

  function drawPostmortem(file) {
    var o = file.oom;
    if (!o) return;
    var sec = section('postmortem', 'Post-mortem');
    h('p', { 'class': 'cause' }, sec, o.sentence);
    var t = h('table', { 'class': 'nums' }, sec);
    function row(k, v) { var r = h('tr', {}, t); h('td', {}, r, k); h('td', {}, r, v); }
    row('requested', bytes(o.requested) + ' (' + o.kind + ', ' + (o.entry || '?') + ')');
    row('device total / free', bytes(o.total) + ' / ' + bytes(o.free));
    row('held by this process', bytes(o.tracked));
    row('not tracked by cumemtrace', bytes(o.untracked) + ' (CUDA context, libraries, other processes)');
    if (o.limit != null) row('CUMEMTRACE_LIMIT', bytes(o.limit));
    row('attempts in the retry chain', o.attempts + (o.recovered === true ? ', recovered later' : o.recovered === false ? ', never recovered' : ''));
    if (o.released) row('freed by the retries', bytes(o.released) + ' in ' + o.released_count + ' allocations');
    var st = stack(file, o.stack);
    if (st) {
      var sv = h('div', { 'class': 'stackview' }, sec);
      h('div', {}, sv, 'failing call, innermost first: ' + st[0]);
      st[1].forEach(function (f) { h('div', { 'class': FR[f][1] === 1 ? 'py' : FR[f][1] === 2 ? 'marker' : '' }, sv, '  ' + FR[f][0]); });
    }
    if (o.allocator && o.allocator.sentence) h('p', { 'class': 'cause', id: 'allocator-sentence' }, sec, o.allocator.sentence);
    h('h3', {}, sec, 'How the device was used at the failure');
    layoutBar(sec, file, o);
    if (o.layout && o.layout.count) addrLayout(sec, file, o);
    if (o.allocator) allocatorBar(sec, o);
    if (o.layout && o.layout.segments && o.layout.segments.list.length) segmentsPicture(sec, o);
    if (file.advice.length) {
      h('h3', {}, sec, 'What to do');
      var ul = h('ul', { 'class': 'advice' }, sec);
      file.advice.forEach(function (a) { h('li', { 'data-advice': a[0] }, ul, a[1]); });
    }
  }

  /* The device's capacity at the failure: this process's live allocations
   * by call site, the untracked part, the free part, and the request drawn
   * against the free part.  Format 1 records no addresses, so this is the
   * amounts in order, not their positions. */
  function layoutBar(parent, file, o) {
    var W = widthOf(parent), H = 86, y = 30, bh = 30;
    var total = o.total != null ? o.total : 0;
    var live = 0;
    o.live.forEach(function (g) { live += g[1]; });
    var untracked = o.untracked != null ? o.untracked : 0, free = o.free != null ? o.free : 0;
    var cap = Math.max(total, live + untracked + free, live + o.requested);
    var svgEl = s('svg', { width: W, height: H, id: 'layout', 'class': 'layout' }, parent);
    var x = 0, sc = W / (cap || 1);
    function seg(v, fillc, label, cls) {
      if (v <= 0) return;
      var r = s('rect', { x: x, y: y, width: Math.max(0.5, v * sc), height: bh, fill: fillc, stroke: '#fff', 'stroke-width': 0.5,
                          'class': cls, 'data-bytes': v }, svgEl);
      r.addEventListener('mousemove', function (ev) { showTip(ev, label + '\n' + bytes(v)); });
      r.addEventListener('mouseleave', hideTip);
      x += v * sc;
    }
    o.live.forEach(function (g) {
      var si = g[0] >= 0 ? file.stack_site[g[0]] : -1;
      seg(g[1], color(si), si >= 0 ? siteLabel(file, si) : '[no stack]', 'seg-live');
    });
    seg(untracked, '#8c959f', 'not tracked by cumemtrace', 'seg-untracked');
    var xf = x;
    seg(free, '#ffffff', 'free', 'seg-free');
    s('rect', { x: 0, y: y, width: Math.min(W, cap * sc), height: bh, fill: 'none', stroke: '#57606a' }, svgEl);
    var rw = o.requested * sc;
    s('rect', { x: xf, y: y - 16, width: Math.max(1, Math.min(rw, W - xf)), height: 12, fill: '#cf222e', 'class': 'seg-request' }, svgEl);
    s('text', { x: xf > W * 0.6 ? W : xf, y: y - 20, 'text-anchor': xf > W * 0.6 ? 'end' : 'start' }, svgEl, 'request ' + bytes(o.requested) + (free < o.requested ? ' > free ' + bytes(free) : ' <= free ' + bytes(free)));
    s('text', { x: 0, y: y + bh + 16 }, svgEl, 'held ' + bytes(live) + ' | not tracked ' + bytes(untracked) + ' | free ' + bytes(free) +
      (total ? ' | total ' + bytes(total) : ''));
    h('p', { 'class': 'note' }, parent, 'Amounts, not addresses: the bar shows how much each ' +
      'call site held beside the untracked and free memory' + (o.cause === 'fragmentation' ? '; the free memory was split into holes smaller than the request.' : '.') +
      (o.layout && o.layout.count ? ' Where they sat: the address layout below.' : ''));
  }

  /* Where this process's live allocations sat on the device (oom.layout):
   * each listed allocation at its offset in its call site's colour, the
   * largest gaps between them as holes (red outline when smaller than the
   * request), unlisted stretches grey, the free that would make room
   * outlined, and the request drawn to the same scale above. */
  function addrLayout(parent, file, o) {
    var L = o.layout;
    h('h3', {}, parent, 'Address layout of this process\'s allocations on device ' + o.device);
    var W = widthOf(parent), H = 112, y = 40, bh = 34, span = L.span || 1, sc = W / span;
    var svgEl = s('svg', { width: W, height: H, id: 'addr-layout', 'data-count': L.count }, parent);
    function tipOn(r, text) {
      r.addEventListener('mousemove', function (ev) { showTip(ev, text); });
      r.addEventListener('mouseleave', hideTip);
    }
    function box(off, v, fillc, cls, text, extra) {
      var a = { x: off * sc, y: y, width: Math.max(1, v * sc), height: bh, fill: fillc, 'class': cls,
                'data-offset': off, 'data-bytes': v };
      for (var k in extra || {}) a[k] = extra[k];
      var r = s('rect', a, svgEl);
      tipOn(r, text);
      return r;
    }
    /* unlisted stretches: between listed allocations, outside listed gaps */
    var known = L.allocs.map(function (a) { return [a[0], a[1]]; }).concat(L.gaps)
      .sort(function (p, q) { return p[0] - q[0]; });
    var at = 0;
    known.forEach(function (k) {
      if (k[0] > at) box(at, k[0] - at, 'url(#cmt-hatch)', 'unlisted',
                         'not listed: more allocations and smaller gaps\n' + bytes(k[0] - at));
      at = Math.max(at, k[0] + k[1]);
    });
    var defs = s('defs', {}, svgEl), pat = s('pattern', { id: 'cmt-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse',
                                                       patternTransform: 'rotate(45)' }, defs);
    s('rect', { width: 6, height: 6, fill: '#d0d7de' }, pat);
    s('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#8c959f', 'stroke-width': 2 }, pat);
    L.allocs.forEach(function (a) {
      var si = a[2] >= 0 ? file.stack_site[a[2]] : -1;
      box(a[0], a[1], color(si), 'alloc', (si >= 0 ? siteLabel(file, si) : '[no stack]') + '\n' + bytes(a[1]) +
          ' at offset ' + bytes(a[0]), { stroke: '#fff', 'stroke-width': 0.5 });
    });
    L.gaps.forEach(function (g, i) {
      var small = g[1] < o.requested;
      box(g[0], g[1], '#ffffff', 'gap' + (small ? ' small' : ''), (i === 0 ? 'largest gap' : 'gap') + ': ' + bytes(g[1]) +
          (small ? ' < request ' : ' >= request ') + bytes(o.requested) + '\nat offset ' + bytes(g[0]),
          { stroke: small ? '#cf222e' : '#1a7f37', 'stroke-width': 1.5 });
      if (i < 3 && g[1] * sc > 34)
        s('text', { x: (g[0] + g[1] / 2) * sc, y: y + bh / 2 + 4, 'text-anchor': 'middle', 'class': 'gap-label' }, svgEl, bytes(g[1]));
    });
    if (L.best) s('rect', { x: L.best[0] * sc - 1, y: y - 3, width: Math.max(1, L.best[1] * sc) + 2, height: bh + 6,
                            fill: 'none', stroke: '#0969da', 'stroke-width': 2, 'stroke-dasharray': '3 2', 'class': 'best-free',
                            'data-bytes': L.best[1] }, svgEl);
    s('rect', { x: 0, y: y, width: Math.min(W, span * sc), height: bh, fill: 'none', stroke: '#57606a' }, svgEl);
    s('rect', { x: 0, y: y - 22, width: Math.max(1, Math.min(W, o.requested * sc)), height: 10, fill: '#cf222e',
                'class': 'seg-request', 'data-bytes': o.requested }, svgEl);
    s('text', { x: Math.min(W - 4, o.requested * sc + 6), y: y - 13, 'text-anchor': o.requested * sc > W * 0.6 ? 'end' : 'start' }, svgEl,
      'request ' + bytes(o.requested) + ' vs largest gap ' + bytes(L.largest_gap) +
      (L.fit ? ' (' + L.fit + ' gap' + (L.fit > 1 ? 's' : '') + ' large enough)' : ': no gap fits'));
    s('text', { x: 0, y: y + bh + 16 }, svgEl, L.count + ' allocations, ' + bytes(L.bytes) + ' over ' + bytes(L.span) +
      ' from ' + L.base + ' | ' + L.gap_count + ' gaps, ' + bytes(L.gap_bytes) +
      (L.allocs.length < L.count ? ' | ' + L.allocs.length + ' allocations and the ' + L.gaps.length + ' largest gaps drawn' : ''));
    h('p', { 'class': 'note' }, parent, 'A gap is address space between two of this process\'s allocations that it does not hold: ' +
      'the most a hole there can be (memory no hook sees may sit in it); holes outside the span are not seen.' +
      (L.best ? ' Dashed blue: the live allocation whose free would leave a hole of ' + bytes(L.best[2]) + '.' : ''));
  }

  /* PyTorch's own view when its allocator spoke: what its tensors hold and
   * what it keeps cached (reserved but unallocated: the holes inside its
   * segments), the largest of those holes and the request beside it. */
  function allocatorBar(parent, o) {
    var a = o.allocator;
    if (a.reserved == null || a.allocated == null) return;
    h('h3', {}, parent, (a.name || 'the caching allocator') + '\'s segments at the failure');
    var W = widthOf(parent), H = 86, y = 30, bh = 30;
    var req = a.requested != null ? a.requested : o.requested;
    var cap = Math.max(a.reserved, a.allocated + req) || 1, sc = W / cap;
    var svgEl = s('svg', { width: W, height: H, id: 'allocator-layout' }, parent);
    function seg(x, v, fillc, label, cls) {
      var r = s('rect', { x: x, y: y, width: Math.max(0.5, v * sc), height: bh, fill: fillc, stroke: '#fff',
                          'stroke-width': 0.5, 'class': cls, 'data-bytes': v }, svgEl);
      r.addEventListener('mousemove', function (ev) { showTip(ev, label + '\n' + bytes(v)); });
      r.addEventListener('mouseleave', hideTip);
    }
    var un = a.unallocated != null ? a.unallocated : Math.max(0, a.reserved - a.allocated);
    seg(0, a.allocated, '#4e79a7', 'allocated: held by tensors', 'seg-allocated');
    seg(a.allocated * sc, un, '#f6f8fa', 'reserved but unallocated: cached, split into free blocks', 'seg-cached');
    var big = Math.max(a.largest_free_large || 0, a.largest_free_small || 0);
    if (big > 0) seg(a.allocated * sc, big, '#edc948', 'largest free block', 'seg-largest');
    s('rect', { x: 0, y: y, width: Math.min(W, a.reserved * sc), height: bh, fill: 'none', stroke: '#57606a' }, svgEl);
    s('rect', { x: a.allocated * sc, y: y - 16, width: Math.max(1, Math.min(req * sc, W - a.allocated * sc)), height: 12,
                fill: '#cf222e', 'class': 'seg-request' }, svgEl);
    var xa = a.allocated * sc;
    s('text', { x: xa > W * 0.6 ? W : xa, y: y - 20, 'text-anchor': xa > W * 0.6 ? 'end' : 'start' }, svgEl, 'request ' + bytes(req) + ' vs largest free block ' + bytes(big));
    s('text', { x: 0, y: y + bh + 16 }, svgEl, 'allocated ' + bytes(a.allocated) + ' | cached (unallocated) ' + bytes(un) +
      ' | reserved ' + bytes(a.reserved) + (a.segments != null ? ' in ' + a.segments + ' segments' : ''));
  }

  /* The caching allocator's segments at the failure (oom.layout's
   * allocator_segments): one row per segment, its length to scale, cut
   * into its blocks - tensors blue, freed-but-in-use orange, free blocks
   * white, outlined red when smaller than the request and green when it
   * would fit.  Rows beyond SEG_ROWS are counted, not drawn. */
  var SEG_ROWS = 48;
  function segmentsPicture(parent, o) {
    var G = o.layout.segments, a = o.allocator || {};
    var req = a.requested != null ? a.requested : o.requested;
    var rows = G.list; /* in address order, as the allocator listed them */
    var shown = rows.slice(0, SEG_ROWS), nblocks = 0;
    h('h3', {}, parent, (a.name || 'the caching allocator') + '\'s segments and blocks at the failure');
    var W = widthOf(parent), ml = 118, rh = 12, gap = 3, top = 22;
    var big = Math.max.apply(null, shown.map(function (g) { return g[1]; }).concat([req, 1]));
    var sc = (W - ml - 8) / big;
    var svgEl = s('svg', { width: W, height: top + shown.length * (rh + gap) + 22, id: 'allocator-segments',
                           'data-segments': G.count, 'data-blocks': G.blocks }, parent);
    var FILL = ['#ffffff', '#4e79a7', '#f28e2b', '#c5cbd3'], NAME = ['free', 'tensor', 'freed, in use by a stream', 'unknown'];
    s('rect', { x: ml, y: 4, width: Math.max(1, req * sc), height: 10, fill: '#cf222e', 'class': 'seg-request', 'data-bytes': req }, svgEl);
    s('text', { x: ml - 6, y: 13, 'text-anchor': 'end' }, svgEl, 'request ' + bytes(req));
    shown.forEach(function (g, i) {
      var y = top + i * (rh + gap);
      s('text', { x: ml - 6, y: y + rh - 2, 'text-anchor': 'end', 'class': 'mono' }, svgEl, g[0] + (g[2] ? ' s' : ''));
      g[3].forEach(function (b) {
        var st = b[2] < 4 ? b[2] : 3, free = st === 0;
        var r = s('rect', { x: ml + b[0] * sc, y: y, width: Math.max(0.5, b[1] * sc), height: rh, fill: FILL[st],
                            stroke: free ? (b[1] >= req ? '#1a7f37' : '#cf222e') : '#fff', 'stroke-width': free ? 1 : 0.5,
                            'class': 'block ' + ['free', 'allocated', 'pending', 'unknown'][st], 'data-bytes': b[1] }, svgEl);
        r.addEventListener('mousemove', function (ev) {
          showTip(ev, NAME[st] + ' block: ' + bytes(b[1]) + '\nsegment ' + g[0] + ' (' + bytes(g[1]) + (g[2] ? ', small pool' : '') + ')' +
                  (free ? (b[1] >= req ? '\nlarge enough for the request' : '\nsmaller than the request ' + bytes(req)) : ''));
        });
        r.addEventListener('mouseleave', hideTip);
        nblocks++;
      });
      s('rect', { x: ml, y: y, width: Math.max(1, g[1] * sc), height: rh, fill: 'none', stroke: '#57606a', 'class': 'segment',
                  'data-bytes': g[1] }, svgEl);
    });
    var untold = G.count - shown.length;
    s('text', { x: ml, y: top + shown.length * (rh + gap) + 14 }, svgEl, G.count + ' segments, ' + G.blocks + ' blocks' +
      (untold > 0 ? ' | ' + shown.length + ' segments (' + nblocks + ' blocks) drawn, ' + untold + ' more not drawn' : ''));
  }

  /* ---------------- several processes ---------------- */

  function drawRanks(files, pick, onPick) {
    var sec = section('ranks', files.length + ' processes');
    var t = h('table', {}, sec), hr = h('tr', {}, h('thead', {}, t)), tb = h('tbody', {}, t);
    ['file', 'rank', 'pid', 'reason', 'peak', 'OOM'].forEach(function (c, i) { h('th', { 'class': i ? '' : 'l' }, hr, c); });
    var W = widthOf(sec), H = 160, ml = 64, mb = 22;
    var end = 1, ymax = 1;
    files.forEach(function (f) { f.devices.forEach(function (d) { end = Math.max(end, d.end_ns); ymax = Math.max(ymax, d.peak); }); });
    files.forEach(function (f, i) {
      var peak = 0;
      f.devices.forEach(function (d) { peak = Math.max(peak, d.peak); });
      var r = h('tr', { 'data-file': i }, tb);
      var td = h('td', { 'class': 'l' }, r);
      h('span', { 'class': 'sw', style: 'display:inline-block;width:9px;height:9px;margin-right:5px;background:' + color(i) }, td);
      var a = h('a', { href: '#' }, td, f.file);
      a.addEventListener('click', function (ev) { ev.preventDefault(); onPick(i); });
      h('td', {}, r, f.rank == null ? '-' : String(f.rank));
      h('td', {}, r, String(f.pid));
      h('td', {}, r, f.reason);
      h('td', {}, r, bytes(peak));
      h('td', {}, r, f.oom ? f.oom.cause : '-');
      if (i === pick) r.classList.add('sel');
    });
    var svgEl = s('svg', { width: W, height: H, id: 'ranks-chart' }, sec);
    var px = function (t) { return ml + t / end * (W - ml - 10); };
    var py = function (v) { return 8 + (1 - v / ymax) * (H - 8 - mb); };
    s('text', { x: ml - 6, y: py(ymax) + 8, 'text-anchor': 'end' }, svgEl, bytes(ymax));
    s('text', { x: ml - 6, y: py(0), 'text-anchor': 'end' }, svgEl, '0');
    s('text', { x: W - 10, y: H - 6, 'text-anchor': 'end' }, svgEl, dur(end));
    files.forEach(function (f, i) {
      f.devices.filter(function (d) { return d.ordinal >= 0; }).forEach(function (d) {
        var p = 'M' + px(0) + ',' + py(0);
        d.points.forEach(function (q, k) {
          var nx = k + 1 < d.points.length ? d.points[k + 1][0] : d.end_ns;
          p += 'L' + px(q[0]).toFixed(1) + ',' + py(q[1]).toFixed(1) + 'L' + px(nx).toFixed(1) + ',' + py(q[1]).toFixed(1);
        });
        s('path', { d: p, fill: 'none', stroke: color(i), 'stroke-width': 1.5, 'class': 'rank-line', 'data-file': i }, svgEl);
      });
    });
    h('p', { 'class': 'note' }, sec, 'Each line: one process\'s device memory over time since its own start. The sections below show the process picked above.');
  }

  /* ---------------- diff ---------------- */

  function drawDiffSummary(a, b) {
    var sec = section('diffsummary', 'Peak per device: base vs new');
    var t = h('table', {}, sec), hr = h('tr', {}, h('thead', {}, t)), tb = h('tbody', {}, t);
    h('p', { 'class': 'note' }, sec, 'base: ' + a.file + ' (' + procName(a) + '); new: ' + b.file + ' (' + procName(b) + ')');
    ['device', 'base peak', 'new peak', 'change'].forEach(function (c, i) { h('th', { 'class': i ? '' : 'l' }, hr, c); });
    var names = {};
    a.devices.concat(b.devices).forEach(function (d) { names[d.name] = 1; });
    Object.keys(names).forEach(function (n) {
      var da = a.devices.filter(function (d) { return d.name === n; })[0], db = b.devices.filter(function (d) { return d.name === n; })[0];
      var pa = da ? da.peak : 0, pb = db ? db.peak : 0, r = h('tr', {}, tb);
      h('td', { 'class': 'l' }, r, n);
      h('td', {}, r, bytes(pa));
      h('td', {}, r, bytes(pb));
      h('td', {}, r, sbytes(pb - pa) + (pa ? ' (' + (100 * (pb - pa) / pa).toFixed(1) + '%)' : ''));
    });
  }

  function drawDiffTimelines(a, b) {
    var sec = section('timeline', 'Memory over time: base above, new below, same time and size axes');
    /* one time axis for all; one size axis per device name */
    var end = 1, ymax = {};
    [a, b].forEach(function (f) { f.devices.forEach(function (d) { end = Math.max(end, d.end_ns); ymax[d.name] = Math.max(ymax[d.name] || 1, d.peak); }); });
    [[a, 'base'], [b, 'new']].forEach(function (p) {
      p[0].devices.forEach(function (dev) {
        h('h3', {}, sec, p[1] + ' (' + procName(p[0]) + '), ' + dev.name + ': peak ' + bytes(dev.peak));
        timelineChart(sec, p[0], dev, { domain: [0, end], ymax: ymax[dev.name], height: 180 });
      });
    });
  }

  /* ---------------- page ---------------- */

  var api = { data: D, bytes: bytes };
  window.cumemtrace = api;

  function meta(f) {
    var m = document.getElementById('meta');
    m.textContent = '';
    h('div', {}, m, f.file + ' - ' + procName(f) + (f.host ? ' on ' + f.host : '') + ', ' + f.reason + ' dump at ' + dur(f.dump_ns));
    if (f.recovered)
      h('div', { 'class': 'note', id: 'recovered' }, m, 'Recovered from the stream of a process that was killed: ' + f.recovered);
    if (f.cmdline.length) h('code', {}, h('div', {}, m), f.cmdline.join(' '));
    h('div', {}, m, 'written by ' + (f.tool_version ? 'cumemtrace ' + f.tool_version : 'cumemtrace') + ', drawn by ' + D.generator);
  }

  function renderFile(i) {
    main.textContent = '';
    var f = D.files[i];
    if (D.files.length > 1) {
      drawRanks(D.files, i, function (k) { picker.value = k; renderFile(k); });
    }
    meta(f);
    drawPostmortem(f);
    performance.mark('cmt-timeline');
    drawTimeline(f);
    performance.mark('cmt-flame');
    drawFlame(f);
    performance.mark('cmt-sites');
    drawSites(f);
  }

  var picker = null;
  if (D.kind === 'diff') {
    meta(D.files[1]);
    drawDiffSummary(D.files[0], D.files[1]);
    drawFlame(D.files[1], D.files[0]);
    drawDiffTimelines(D.files[0], D.files[1]);
  } else {
    var pick = 0;
    D.files.forEach(function (f, i) {
      if (f.oom && !D.files[pick].oom) pick = i;
      var pf = 0, pp = 0;
      f.devices.forEach(function (d) { pf = Math.max(pf, d.peak); });
      D.files[pick].devices.forEach(function (d) { pp = Math.max(pp, d.peak); });
      if (!!f.oom === !!D.files[pick].oom && pf > pp) pick = i;
    });
    if (D.files.length > 1) {
      var pk = document.getElementById('picker');
      pk.appendChild(document.createTextNode('process: '));
      picker = h('select', { id: 'file-picker' }, pk);
      D.files.forEach(function (f, i) { h('option', { value: i }, picker, procName(f) + ' - ' + f.file); });
      picker.value = pick;
      picker.addEventListener('change', function () { renderFile(+picker.value); });
    }
    renderFile(pick);
  }
  performance.mark('cmt-drawn');
  /* Interactive once the first frame with everything drawn has been laid
   * out and painted: a task queued from the frame's callback runs after it. */
  requestAnimationFrame(function () {
    setTimeout(function () { performance.mark('cmt-interactive'); }, 0);
  });
})();
