"""`hil dashboard`: a static site over many results.json files (nights, chipsets, flows,
precisions) for the morning read. `model` reads the runs and judges them (latency through
`hil compare`'s own judgement), `charts` draws them with matplotlib as inline SVG, `page`
renders the one `index.html` with jinja2."""
