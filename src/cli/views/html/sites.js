  /* sites.js - the sortable call-site table (see common.js for how the
   * script's files are joined). */
  /* ---------------- call sites ---------------- */

  function drawSites(file) {
    var tm = !!file.tensor_model;
    var sec = section('sites', tm ? "PyTorch's tensors by the user's line" :
                      hasAllocator(file) ? 'Call sites: cached segments, by the line that created them' : 'Call sites');
    var cols = [['label', tm ? 'line' : 'call site', 'l'], ['at_peak', 'at peak'], ['live', 'live at dump']];
    if (file.oom) cols.push(['oom', 'at OOM']);
    if (!tm) cols.push(['allocs', 'allocations'], ['frees', 'frees'], ['alloc_bytes', 'allocated in total']);
    if (tm) h('p', { 'class': 'note' }, sec, "PyTorch's live blocks grouped by the first frame in the program's own code, as cumemtrace report lists them; ? where the file has no reading of them at that moment.");
    else if (!file.counted) h('p', { 'class': 'note' }, sec, 'The event log was thinned: allocation and free counts are unknown (?).');
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
      if (st[0]) h('div', {}, view, '  ' + st[0]);
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

