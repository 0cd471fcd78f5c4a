"""The results explorer: a static `index.html` written beside every score, report and profile (issue 31).

- `views`: the page's data model (one item view per browsed unit; a family's `explore` part makes them).
- `thumbs`: thumbnails and full-size JPEGs, content-addressed and cached, made in parallel.
- `packing`: the items packed for data.js (arrays, each repeated string once) and back.
- `page`: writes `index.html` and `explorer/` (the app, its style, `data.js`) into a folder.
- `sources`: the page data of a score dir, a report dir and profiles.
- `cli`: `mmfaith view DIR [--dataset SOURCE] [--serve]`.
"""
