  /* roles.js - whose PyTorch's tensors are: one stacked bar per measured
   * allocator state (html_roles.c), parameters to other tensors, then the
   * allocator's cache (reserved but unallocated), to one scale. */
  /* ---------------- roles ---------------- */

  var ROLE_COLORS = ['#4e79a7', '#76b7b2', '#f28e2b', '#59a14f', '#b07aa1', '#f6f8fa'];

  function drawRoles(file) {
    if (!file.roles || !file.roles.length) return;
    var sec = section('roles', 'PyTorch\'s memory by role');
    var W = widthOf(sec), bh = 28;
    var most = 1;
    file.roles.forEach(function (r) {
      var t = 0;
      r.parts.forEach(function (p) { t += p[1]; });
      most = Math.max(most, t);
    });
    var sc = W / most;
    file.roles.forEach(function (r, k) {
      h('h3', {}, sec, r.title);
      var svgEl = s('svg', { width: W, height: bh + 22, 'class': 'roles-bar', id: 'roles-' + k }, sec);
      var x = 0;
      r.parts.forEach(function (p, i) {
        if (p[1] <= 0) return;
        var label = (i === 3 && r.optimizers ? r.optimizers + ' state' : p[0]) + (i === 4 ? ' (activations, inputs, temporaries)' : '') +
          (i === 5 ? ' (reserved - allocated)' : '');
        var rect = s('rect', { x: x, y: 4, width: Math.max(0.5, p[1] * sc), height: bh, fill: ROLE_COLORS[i],
                               stroke: i === 5 ? '#57606a' : '#fff', 'stroke-width': 0.5, 'class': 'role',
                               'data-role': p[0], 'data-bytes': p[1] }, svgEl);
        tipOn(rect, label + '\n' + bytes(p[1]));
        if (p[1] * sc > 90)
          s('text', { x: x + 4, y: 4 + bh / 2 + 4, fill: i === 5 ? '#24292f' : '#fff' }, svgEl, (i === 3 && r.optimizers ? r.optimizers : p[0]) + ' ' + bytes(p[1]));
        x += p[1] * sc;
      });
      h('p', { 'class': 'note' }, sec, r.text);
    });
  }

