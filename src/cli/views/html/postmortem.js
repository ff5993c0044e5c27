  /* postmortem.js - the out-of-memory post-mortem and its pictures of the
   * device, the address space and PyTorch's segments (see common.js for how
   * the script's files are joined). */
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
    if (o.released) row('freed by the retries', bytes(o.released) + ' in ' + o.released_count + (o.released_count === 1 ? ' free' : ' frees'));
    var st = stack(file, o.stack);
    if (st) {
      var sv = h('div', { 'class': 'stackview' }, sec);
      h('div', {}, sv, 'failing call, innermost first: ' + st[0]);
      st[1].forEach(function (f) { h('div', { 'class': FR[f][1] === 1 ? 'py' : FR[f][1] === 2 ? 'marker' : '' }, sv, '  ' + FR[f][0]); });
    }
    if (o.allocator && o.allocator.origin) h('p', { 'class': 'cause', id: 'autograd-node' }, sec, 'autograd node: ' + o.allocator.origin);
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
      tipOn(r, label + '\n' + bytes(v));
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
      'call site held beside the untracked and free memory.' +
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
      box(g[0], g[1], '#ffffff', 'gap' + (small ? ' small' : ''), (i === 0 ? 'largest address gap' : 'address gap') + ': ' + bytes(g[1]) +
          (small ? ' < request ' : ' >= request ') + bytes(o.requested) + '\nat offset ' + bytes(g[0]),
          { stroke: small ? '#cf222e' : '#1a7f37', 'stroke-width': 1.5 });
      if (i < 3)
        boxLabel(svgEl, { x: (g[0] + g[1] / 2) * sc, y: y + bh / 2 + 4, 'text-anchor': 'middle', 'class': 'gap-label' },
                 bytes(g[1]), g[1] * sc - 4, FONT_LABEL, { whole: true });
    });
    if (L.best) s('rect', { x: L.best[0] * sc - 1, y: y - 3, width: Math.max(1, L.best[1] * sc) + 2, height: bh + 6,
                            fill: 'none', stroke: '#0969da', 'stroke-width': 2, 'stroke-dasharray': '3 2', 'class': 'best-free',
                            'data-bytes': L.best[1] }, svgEl);
    s('rect', { x: 0, y: y, width: Math.min(W, span * sc), height: bh, fill: 'none', stroke: '#57606a' }, svgEl);
    s('rect', { x: 0, y: y - 22, width: Math.max(1, Math.min(W, o.requested * sc)), height: 10, fill: '#cf222e',
                'class': 'seg-request', 'data-bytes': o.requested }, svgEl);
    s('text', { x: Math.min(W - 4, o.requested * sc + 6), y: y - 13, 'text-anchor': o.requested * sc > W * 0.6 ? 'end' : 'start' }, svgEl,
      'request ' + bytes(o.requested) + ' vs largest address gap between this process\'s allocations ' + bytes(L.largest_gap) +
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
      tipOn(r, label + '\n' + bytes(v));
    }
    var un = a.unallocated != null ? a.unallocated : Math.max(0, a.reserved - a.allocated);
    seg(0, a.allocated, '#4e79a7', 'allocated: held by tensors', 'seg-allocated');
    seg(a.allocated * sc, un, '#f6f8fa', 'reserved but unallocated: cached, split into free blocks', 'seg-cached');
    var big = Math.max(a.largest_free_large || 0, a.largest_free_small || 0);
    var who = a.name === 'pytorch' ? 'PyTorch' : (a.name || 'the caching allocator');
    if (big > 0) seg(a.allocated * sc, big, '#edc948', who + '\'s largest free block (inside its segments)', 'seg-largest');
    s('rect', { x: 0, y: y, width: Math.min(W, a.reserved * sc), height: bh, fill: 'none', stroke: '#57606a' }, svgEl);
    s('rect', { x: a.allocated * sc, y: y - 16, width: Math.max(1, Math.min(req * sc, W - a.allocated * sc)), height: 12,
                fill: '#cf222e', 'class': 'seg-request' }, svgEl);
    var xa = a.allocated * sc;
    s('text', { x: xa > W * 0.6 ? W : xa, y: y - 20, 'text-anchor': xa > W * 0.6 ? 'end' : 'start' }, svgEl, 'request ' + bytes(req) + ' vs ' + who + '\'s largest free block (inside its segments) ' + bytes(big));
    s('text', { x: 0, y: y + bh + 16 }, svgEl, 'allocated ' + bytes(a.allocated) + ' | cached (unallocated) ' + bytes(un) +
      ' | reserved ' + bytes(a.reserved) + (a.segments != null ? ' in ' + a.segments + (a.segments === 1 ? ' segment' : ' segments') : ''));
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
    /* the left margin as wide as the widest row label (an address, " s"
     * for the small pool), up to a third of the picture; beyond, cut */
    function rowName(g) { return g[0] + (g[2] ? ' s' : ''); }
    var W = widthOf(parent), rh = 12, gap = 3, top = 22;
    var ml = Math.min(Math.floor(W / 3), 12 + Math.max.apply(null, shown.map(function (g) {
      return textWidth(rowName(g), FONT_MONO); }).concat([textWidth('request ' + bytes(req), FONT_LABEL), 40])));
    var big = Math.max.apply(null, shown.map(function (g) { return g[1]; }).concat([req, 1]));
    var sc = (W - ml - 8) / big;
    var svgEl = s('svg', { width: W, height: top + shown.length * (rh + gap) + 22, id: 'allocator-segments',
                           'data-segments': G.count, 'data-blocks': G.blocks }, parent);
    var FILL = ['#ffffff', '#4e79a7', '#f28e2b', '#c5cbd3'], NAME = ['free', 'tensor', 'freed, in use by a stream', 'unknown'];
    s('rect', { x: ml, y: 4, width: Math.max(1, req * sc), height: 10, fill: '#cf222e', 'class': 'seg-request', 'data-bytes': req }, svgEl);
    s('text', { x: ml - 6, y: 13, 'text-anchor': 'end' }, svgEl, 'request ' + bytes(req));
    shown.forEach(function (g, i) {
      var y = top + i * (rh + gap);
      boxLabel(svgEl, { x: ml - 6, y: y + rh - 2, 'text-anchor': 'end', 'class': 'mono' }, rowName(g), ml - 8, FONT_MONO,
               { middle: true });
      g[3].forEach(function (b) {
        var st = b[2] < 4 ? b[2] : 3, free = st === 0;
        var r = s('rect', { x: ml + b[0] * sc, y: y, width: Math.max(0.5, b[1] * sc), height: rh, fill: FILL[st],
                            stroke: free ? (b[1] >= req ? '#1a7f37' : '#cf222e') : '#fff', 'stroke-width': free ? 1 : 0.5,
                            'class': 'block ' + ['free', 'allocated', 'pending', 'unknown'][st], 'data-bytes': b[1] }, svgEl);
        tipOn(r, NAME[st] + ' block: ' + bytes(b[1]) + '\nsegment ' + g[0] + ' (' + bytes(g[1]) + (g[2] ? ', small pool' : '') + ')' +
                 (free ? (b[1] >= req ? '\nlarge enough for the request' : '\nsmaller than the request ' + bytes(req)) : ''));
        nblocks++;
      });
      s('rect', { x: ml, y: y, width: Math.max(1, g[1] * sc), height: rh, fill: 'none', stroke: '#57606a', 'class': 'segment',
                  'data-bytes': g[1] }, svgEl);
    });
    var untold = G.count - shown.length;
    s('text', { x: ml, y: top + shown.length * (rh + gap) + 14 }, svgEl, G.count + ' segments, ' + G.blocks + ' blocks' +
      (untold > 0 ? ' | ' + shown.length + ' segments (' + nblocks + ' blocks) drawn, ' + untold + ' more not drawn' : ''));
  }

