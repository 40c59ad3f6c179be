"""The dashboard serves gzip to browsers that ask for it (same bytes once decompressed), keeps the gzip of
immutable files (Dash's fingerprinted bundles, /assets/?m=...) and marks assets cacheable."""

from __future__ import annotations

import gzip
import re

from tests.dashboard.conftest import APP


def _client():
    return APP.server.test_client()


def _bundle_urls(html: str) -> list[str]:
    return re.findall(r'src="(/_dash-component-suites/[^"]+\.js)"', html)


def test_the_index_and_the_js_bundles_are_gzipped_and_decompress_to_the_same_bytes():
    client = _client()
    plain = client.get("/", headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    urls = _bundle_urls(plain.get_data(as_text=True))
    assert len(urls) >= 5
    total_plain = total_gz = 0
    for url in urls:
        raw = client.get(url, headers={"Accept-Encoding": "identity"})
        gz = client.get(url, headers={"Accept-Encoding": "gzip, deflate, br"})
        assert gz.headers["Content-Encoding"] == "gzip" and "Accept-Encoding" in gz.headers["Vary"]
        assert gzip.decompress(gz.get_data()) == raw.get_data()
        assert gz.cache_control.max_age and gz.cache_control.max_age >= 86400  # fingerprinted: cached a year
        total_plain += len(raw.get_data())
        total_gz += len(gz.get_data())
    assert total_gz < 0.4 * total_plain  # JavaScript compresses to about a quarter


def test_the_gzip_of_an_immutable_file_is_computed_once():
    client = _client()
    url = _bundle_urls(client.get("/").get_data(as_text=True))[0]
    compressor = next(f for f in APP.server.after_request_funcs[None] if hasattr(f, "_cache"))
    client.get(url, headers={"Accept-Encoding": "gzip"})
    cached = dict(compressor._cache)
    assert any(url in k for k in cached)
    again = client.get(url, headers={"Accept-Encoding": "gzip"})
    key = next(k for k in cached if url in k)
    assert again.get_data() is not None and compressor._cache[key] is cached[key]


def test_assets_with_a_version_query_are_cacheable_and_small_or_unasked_responses_stay_plain():
    client = _client()
    html = client.get("/").get_data(as_text=True)
    css = re.search(r'href="(/assets/specwatch\.css\?m=[^"]+)"', html).group(1)
    r = client.get(css, headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200 and r.cache_control.public and r.cache_control.max_age == 31536000
    assert r.headers["Content-Encoding"] == "gzip" and b"sw-tone-green" in gzip.decompress(r.get_data())
    plain = client.get(css)
    assert "Content-Encoding" not in plain.headers and b"sw-tone-green" in plain.get_data()
