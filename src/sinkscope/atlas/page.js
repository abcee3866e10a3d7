(function () {
  const atlas = JSON.parse(document.getElementById("atlas-data").textContent);
  const config = {displaylogo: false, responsive: false};
  const bytes = atlas.models.map(m =>
    Uint8Array.from(atob(m.maps.data), c => c.charCodeAt(0)));
  function shown(v) {
    if (v === null) return "n/a";
    if (typeof v === "number" && !Number.isInteger(v)) return v.toPrecision(4);
    return String(v);
  }
  function showImage(m, image, sink, label) {
    const h = image.height / image.rows, w = image.width / image.columns;
    const line = {color: "rgba(255,255,255,0.4)", width: 0.5};
    const shapes = [];  // the patch grid; pixel centres sit at whole coordinates
    for (let r = 1; r < image.rows; r++)
      shapes.push({type: "line", x0: -0.5, x1: image.width - 0.5,
                   y0: r * h - 0.5, y1: r * h - 0.5, line: line});
    for (let c = 1; c < image.columns; c++)
      shapes.push({type: "line", y0: -0.5, y1: image.height - 0.5,
                   x0: c * w - 0.5, x1: c * w - 0.5, line: line});
    const patch = sink - image.prefix;
    let caption = "the example's sink is its " + label + " token, not a patch";
    if (sink === -1) caption = "the example's sink is the head's learned sink logit";
    else if (sink < 0) caption = "no sink recorded for this head";
    else if (patch >= 0 && patch < image.rows * image.columns) {
      const r = Math.floor(patch / image.columns), c = patch % image.columns;
      shapes.push({type: "rect", x0: c * w - 0.5, x1: (c + 1) * w - 0.5, y0: r * h - 0.5,
                   y1: (r + 1) * h - 0.5, line: {color: "red", width: 2}});
      caption = "the example's sink: patch " + label + ", outlined in red";
    }
    document.getElementById("image-caption-" + m).textContent = caption;
    Plotly.react("image-" + m, [{type: "image", source: image.source, hoverinfo: "skip"}],
      {width: 260, height: 260, margin: {l: 5, r: 5, t: 5, b: 5}, shapes: shapes,
       xaxis: {visible: false, range: [-0.5, image.width - 0.5]},
       yaxis: {visible: false, range: [image.height - 0.5, -0.5]}}, config);
  }
  function showHead(m, layer, head) {
    const model = atlas.models[m];
    const index = layer * model.n_heads + head;
    const row = model.rows[index];
    if (!row) return;
    const panel = document.getElementById("panel-" + m);
    panel.dataset.layer = layer;
    panel.dataset.head = head;
    const sink = model.example_sink[index], label = model.sink_labels[index];
    const size = model.maps.size, labels = model.maps.labels;
    document.getElementById("map-title-" + m).textContent = "layer " + layer + ", head " + head +
      (sink === -1 ? " (example sink: its learned sink logit, value-less)"
        : sink < 0 ? " (no example sink)"
        : " (example sink: " + label + ", position " + sink + ")");
    if (model.image) showImage(m, model.image, sink, label);
    document.getElementById("numbers-" + m).replaceChildren(...model.columns.flatMap(
      (name, i) => [[name, "name"], [shown(row[i]), "value"]].map(([text, kind]) => {
        const cell = document.createElement("span");
        cell.className = kind;
        cell.textContent = text;
        return cell;
      })));
    const start = model.maps.offsets[index];
    if (start < 0 || size === 0) {
      Plotly.purge("map-" + m);
      return;
    }
    const z = [], text = [];  // colour by sqrt(weight): small weights stay visible
    for (let q = 0; q < size; q++) {
      const shade = new Array(size), tips = new Array(size);
      for (let k = 0; k < size; k++) {
        const weight = bytes[m][start + q * size + k] / 255;
        shade[k] = Math.sqrt(weight);
        tips[k] = labels[q] + " → " + labels[k] + ": " + weight.toFixed(3);
      }
      z.push(shade);
      text.push(tips);
    }
    const ticks = {tickvals: labels.map((_, i) => i), ticktext: labels, tickfont: {size: 8}};
    const marks = [0, 0.01, 0.05, 0.2, 0.5, 1];
    const shapes = sink >= 0 && sink < size ? [{type: "rect", x0: sink - 0.5, x1: sink + 0.5,
      y0: -0.5, y1: size - 0.5, line: {color: "red", width: 1, dash: "dot"}}] : [];
    Plotly.react("map-" + m, [{type: "heatmap", z: z, text: text, colorscale: "Viridis",
        zmin: 0, zmax: 1, hovertemplate: "%{text}<extra></extra>",
        colorbar: {title: {text: "weight"}, tickvals: marks.map(Math.sqrt), ticktext: marks}}],
      {width: 480, height: 460, margin: {l: 60, r: 10, t: 10, b: 60}, shapes: shapes,
       xaxis: {title: {text: "key"}, ...ticks}, yaxis: {autorange: "reversed", ...ticks}},
      config);
  }
  for (const f of atlas.figures) {
    Plotly.newPlot(f.div, f.figure.data, f.figure.layout, config);
    if (f.grid) {
      document.getElementById(f.div).on("plotly_click", event => {
        const point = event.points[0];
        showHead(f.model, point.y, point.x);
      });
    }
  }
  atlas.models.forEach((model, m) => showHead(m, model.start[0], model.start[1]));
  document.body.dataset.ready = "true";
})();
