  /* timeline.js - per-device memory over time (see common.js for how the
   * script's files are joined). */
  /* ---------------- timeline ---------------- */

  /* One device's memory over time: stacked step areas of its top call sites
   * (the model's bands) and "other" up to the exact total.  Drag to zoom,
   * double-click to reset.  opts.domain shares a time axis (diff). */
  /* The program's ranges (phases: NVTX, PyTorch's, cumemtrace_phase_push)
   * laid out once per file: per thread, a row per nesting level, threads
   * one under another, at most RANGE_ROWS rows. */
  var RANGE_ROWS = 16, RANGE_H = 12;
  function rangeLanes(file) {
    if (file._lanes) return file._lanes;
    var out = { rows: 0, items: [] }, R = file.ranges;
    file._lanes = out;
    if (!R) return out;
    var end = file.dump_ns || 0, byThread = {};
    R.spans.forEach(function (sp) { (byThread[sp[2]] = byThread[sp[2]] || []).push(sp); });
    Object.keys(byThread).sort(function (a, b) { return a - b; }).forEach(function (tid) {
      var list = byThread[tid].slice().sort(function (a, b) {
        var ea = a[1] == null ? Infinity : a[1], eb = b[1] == null ? Infinity : b[1];
        return a[0] - b[0] || eb - ea;
      });
      var open = [], deepest = -1;
      list.forEach(function (sp) {
        var t1 = sp[1] == null ? Math.max(end, sp[0]) : sp[1];
        while (open.length && open[open.length - 1] <= sp[0]) open.pop();
        var row = out.rows + open.length;
        if (sp[4] !== 2) open.push(t1);
        if (row >= RANGE_ROWS) return;
        if (row - out.rows > deepest) deepest = row - out.rows;
        out.items.push({ t0: sp[0], t1: t1, row: row, path: R.paths[sp[3]] || '?', kind: sp[4],
                         open: sp[1] == null, thread: +tid });
      });
      out.rows = Math.min(RANGE_ROWS, out.rows + deepest + 1);
    });
    return out;
  }

  function rangeColor(path) {
    var h = 0;
    for (var i = 0; i < path.length; i++) h = (h * 31 + path.charCodeAt(i)) >>> 0;
    return 'hsl(' + (h % 360) + ',45%,62%)';
  }

  function timelineChart(parent, file, dev, opts) {
    opts = opts || {};
    var W = widthOf(parent), H = opts.height || 240, ml = 64, mr = 12, mt = 10, mb = 26;
    var lanes = rangeLanes(file), RH = lanes.rows ? lanes.rows * RANGE_H + 8 : 0;
    var pts = dev.points, nb = dev.bands.length;
    /* Start where the log starts (the model's first point is the zero at
     * process start), with a little room. */
    var t0 = pts.length > 1 ? pts[1][0] : 0, pad = (dev.end_ns - t0) * 0.02;
    var full = opts.domain || [Math.max(0, t0 - pad), dev.end_ns];
    var dom = opts.domain ? full.slice() : activity(file, dev, full);
    var box = h('div', { 'class': 'tl', 'data-device': dev.name }, parent);
    var svgEl = s('svg', { width: W, height: H + RH, 'class': 'timeline-svg' }, box);
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
          gAxis, tickDur(Math.round(t), (dom[1] - dom[0]) / 5));
      }
      var clipId = 'clip' + Math.random().toString(36).slice(2);
      var cp = s('clipPath', { id: clipId }, svgEl);
      s('rect', { x: ml, y: 0, width: W - ml - mr, height: H + RH }, cp);
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
        var label = j < nb ? siteLabel(file, si) : (nb ? otherLabel(file) : 'total');
        s('path', { d: up + lo.reverse().join('') + 'Z', fill: j < nb ? color(si) : (nb ? OTHER : '#4e79a7'),
                    'class': 'band', 'data-band': j, 'data-site': label }, g);
      }
      if (dev.peak_ns != null) {
        var xp = px(dev.peak_ns);
        s('line', { x1: xp, x2: xp, y1: mt, y2: H - mb, 'class': 'mark-peak' }, g);
        /* beside its mark, on the side where it fits inside the plot (the
         * plot clips: past its right edge "peak 12.2 GiB" read "peak 12.") */
        var pt = 'peak ' + bytes(dev.peak), pleft = xp + 4 + textWidth(pt, FONT_LABEL) > W - mr;
        s('text', { x: pleft ? xp - 4 : xp + 4, y: mt + 10, fill: '#cf222e', 'text-anchor': pleft ? 'end' : 'start',
                    'class': 'mark-label' }, g, pt);
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
        var ot = 'OOM: ' + bytes(file.oom.requested) + ' refused', oright = xo - 4 - textWidth(ot, FONT_LABEL) < ml;
        s('text', { x: oright ? xo + 4 : xo - 4, y: mt + 24, fill: '#cf222e', 'text-anchor': oright ? 'start' : 'end',
                    'class': 'mark-label' }, g, ot);
      }
      s('rect', { x: ml, y: mt, width: W - ml - mr, height: H - mt - mb, fill: 'transparent', 'class': 'hit' }, svgEl);
      if (lanes.rows) drawRanges(g);
    }
    /* Under the memory, on the same time axis: each range a bar titled
     * with its path and duration, a mark a tick. */
    function drawRanges(g) {
      s('text', { x: ml - 6, y: H + 4 + RANGE_H - 3, 'text-anchor': 'end', 'class': 'axis' }, svgEl, 'ranges');
      lanes.items.forEach(function (it) {
        if (it.t1 < dom[0] || it.t0 > dom[1]) return;
        var x0 = Math.max(ml, px(it.t0)), x1 = Math.min(W - mr, px(it.t1)), y = H + 4 + it.row * RANGE_H;
        var what = it.path + (it.kind === 2 ? ' (mark)' : ': ' + dur(Math.round(it.t1 - it.t0)) +
                   (it.open ? ', open at the dump' : '')) + ', thread ' + it.thread;
        var el;
        if (it.kind === 2) {
          el = s('line', { x1: x0, x2: x0, y1: y, y2: y + RANGE_H - 2, 'class': 'range-mark', stroke: '#555',
                           'data-path': it.path }, g);
        } else {
          el = s('rect', { x: x0, y: y, width: Math.max(1, x1 - x0), height: RANGE_H - 2, fill: rangeColor(it.path),
                           'class': 'range', 'data-path': it.path }, g);
          if (x1 - x0 > 40)
            boxLabel(g, { x: x0 + 3, y: y + RANGE_H - 3, 'class': 'range-label' }, it.path.split('/').pop(),
                     x1 - x0 - 6, FONT_RANGE);
        }
        s('title', {}, el, what);
      });
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
        lines.push((nb ? otherLabel(file) + '  ' : 'total  ') + bytes(L[band][1] - L[band][0]));
        if (file.thinned && !file.tensor_model) lines.push('(the event log was thinned: no per-site split)');
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
    if (dom[0] > full[0] || dom[1] < full[1]) {
      svgEl.setAttribute('data-zoomed', '1');
      h('div', { 'class': 'note' }, box, 'Zoomed to the allocation activity (' + dur(Math.round(dom[0])) +
        ' to ' + dur(Math.round(dom[1])) + ' of ' + dur(Math.round(full[1])) + '); double-click for the whole run.');
    }
    return { svg: svgEl, domain: function () { return dom.slice(); } };
  }

  /* The span in which the device's memory changed (and its failures and
   * peak), with a little room: a run that imports for seconds and dumps
   * seconds after its last allocation would otherwise draw all of its
   * activity in a sliver.  The whole span when the
   * activity fills most of it. */
  function activity(file, dev, full) {
    var pts = dev.points, lo = Infinity, hi = -Infinity;
    for (var k = 1; k < pts.length; k++) {
      if (pts[k][0] >= dev.end_ns && k === pts.length - 1 && k > 1) break; /* the dump's own point */
      lo = Math.min(lo, pts[k][0]); hi = Math.max(hi, pts[k][0]);
    }
    var marks = (file.attempts || []).filter(function (a) { return a[1] === dev.ordinal; })
      .map(function (a) { return a[0]; });
    if (file.oom && file.oom.device === dev.ordinal && file.oom.time_ns != null) marks.push(file.oom.time_ns);
    if (dev.peak_ns != null) marks.push(dev.peak_ns);
    marks.forEach(function (t) { lo = Math.min(lo, t); hi = Math.max(hi, t); });
    if (!(hi >= lo) || hi - lo > 0.5 * (full[1] - full[0])) return full.slice();
    var pad = Math.max((hi - lo) * 0.05, (full[1] - full[0]) * 0.002);
    return [Math.max(full[0], lo - pad), Math.min(full[1], hi + pad)];
  }

  /* In a PyTorch process the bands are its lines at its readings of them;
   * the rest of the driver's total is everything else. */
  function otherLabel(file) {
    return file.tensor_model ? "other lines, PyTorch's cache and memory outside its tensors" : 'other call sites';
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
      it.appendChild(document.createTextNode(otherLabel(file)));
    }
  }

  /* A time-axis label precise enough that ticks `step` ns apart differ
   * (2.735 s, 2.741 s: a zoom into 30 ms of a 3 s run read "2.74 s"
   * twice at dur()'s two decimals). */
  function tickDur(ns, step) {
    var u = ns < 1e6 && step < 1e6 ? 1e3 : ns < 1e9 && step < 1e9 ? 1e6 : 1e9;
    if (ns < 1e3 && step < 1e3) return dur(ns);
    var d = Math.min(6, Math.max(u === 1e9 ? 2 : 1, Math.ceil(-Math.log10(step / u))));
    return (ns / u).toFixed(d) + (u === 1e3 ? ' \u00b5s' : u === 1e6 ? ' ms' : ' s');
  }

  function drawTimeline(file) {
    var sec = section('timeline', 'Memory over time');
    h('p', { 'class': 'note' }, sec, (file.tensor_model
      ? 'The driver\'s total, stacked by the lines whose PyTorch tensors held the most at each device\'s peak (else at the dump), ' +
        'each band as PyTorch\'s reading of that line at the peak, the failure and the dump (it holds its value until the next reading). '
      : 'Stacked by the call sites that held the most at each device\'s peak. ') +
      'Hover for the call site, drag to zoom, double-click to reset. Red ticks: failed allocations; green: recoveries.' +
      (file.ranges ? ' Under each chart, the program\'s own ranges (NVTX, PyTorch\'s phases), a row per nesting ' +
       'level and thread; hover a bar for its path.' : ''));
    if (file.thinned && !file.tensor_model)
      h('p', { 'class': 'note' }, sec, 'The event log was thinned (' + file.events_kept + ' of ' + file.events_recorded +
        ' events kept): the total is exact, the split by call site cannot be rebuilt and is not drawn.');
    if (!file.devices.length) h('p', {}, sec, 'No device memory was tracked in this file.');
    file.devices.forEach(function (dev) {
      h('h3', {}, sec, dev.name + ': peak ' + bytes(dev.peak) + ' at ' + dur(dev.peak_ns) + ', at the dump ' + bytes(dev.current));
      figuresAge(sec, dev);
      tensorPeak(sec, dev);
      legend(sec, file, dev);
      timelineChart(sec, file, dev);
    });
  }

