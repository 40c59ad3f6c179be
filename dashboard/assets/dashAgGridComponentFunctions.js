/* AG Grid cell renderers for the fleet overview (dash-ag-grid looks them up by name). */
var dagcomponentfuncs = (window.dashAgGridComponentFunctions = window.dashAgGridComponentFunctions || {});

/* 24 h acceptance sparkline: gaps stay gaps (null is "no data", never 0); dashed line at the row's threshold
   (its class's alpha_low threshold). Points are drawn evenly spaced: 30-min steps, then the last hour in
   5-min steps after a faint mark (the recent end drawn wider, so a drop in the last minutes shows). It
   spans the cell from the first step with data (a pool with 2 h of history is a line, not a stub at the
   right edge); the label says how much of the 24 h it covers. */
dagcomponentfuncs.Sparkline = function (props) {
  var all = props.value || [];
  var data = props.data || {};
  var first = all.findIndex(function (v) { return v !== null && v !== undefined; });
  var vals = first < 0 ? [] : all.slice(first);
  var w = 120, h = 26, n = Math.max(vals.length - 1, 1);
  var hours = data.spark_hours;
  var segs = [], cur = [], last = null;
  vals.forEach(function (v, i) {
    if (v === null || v === undefined) { if (cur.length) { segs.push(cur); } cur = []; return; }
    var y = Math.max(0, Math.min(1, v));
    cur.push((i / n * w).toFixed(1) + ',' + (h - 2 - y * (h - 4)).toFixed(1));
    last = v;
  });
  if (cur.length) { segs.push(cur); }
  if (!segs.length) {
    return React.createElement('span', {title: 'no data', className: 'sw-nodata'}, '\u2014');
  }
  var children = [];
  var limit = data.alpha_threshold;
  if (limit !== null && limit !== undefined) {
    var ty = (h - 2 - limit * (h - 4)).toFixed(1);
    children.push(React.createElement('line', {key: 't', x1: 0, x2: w, y1: ty, y2: ty,
      stroke: '#E69F00', strokeDasharray: '3,3', strokeWidth: 1}));
  }
  var fine = data.spark_fine;
  if (fine !== null && fine !== undefined && fine - first > 0 && vals.length > 1) {
    var fx = ((fine - first - 0.5) / n * w).toFixed(1);
    children.push(React.createElement('line', {key: 'f', x1: fx, x2: fx, y1: 0, y2: h,
      stroke: '#999999', strokeWidth: 0.5, className: 'sw-spark-fine'}));
  }
  segs.forEach(function (s, i) {
    if (s.length === 1) {
      var xy = s[0].split(',');
      children.push(React.createElement('circle', {key: 'p' + i, cx: xy[0], cy: xy[1], r: 1.5, fill: '#0072B2'}));
    } else {
      children.push(React.createElement('polyline', {key: 's' + i, points: s.join(' '), fill: 'none',
        stroke: '#0072B2', strokeWidth: 1.5}));
    }
  });
  var span = (hours === null || hours === undefined || hours >= 23.5) ? '24 h' : hours.toFixed(1) + ' h (of 24 h)';
  return React.createElement('svg', {width: w, height: h, role: 'img', className: 'sw-spark',
    'aria-label': 'acceptance rate, last ' + span + ', the last hour in 5-min steps; latest ' +
    (last === null ? 'no data' : last.toFixed(3)) +
    (limit === null || limit === undefined ? '' : '; threshold ' + limit.toFixed(2))}, children);
};
