import pytest

from backend.domain.bands import BAND_EDGES, band_labels, concurrency_band


def test_default_labels():
    assert BAND_EDGES == (8, 32, 128)
    assert band_labels() == ["1-8", "9-32", "33-128", ">128"]


@pytest.mark.parametrize("mean, band", [(0.4, "1-8"), (1, "1-8"), (8, "1-8"), (8.2, "9-32"), (32, "9-32"),
                                        (33, "33-128"), (128, "33-128"), (128.5, ">128"), (4000, ">128")])
def test_band_boundaries(mean, band):
    assert concurrency_band(mean) == band


def test_undefined_and_idle():
    assert concurrency_band(None) is None
    assert concurrency_band(float("nan")) is None
    assert concurrency_band(0) is None


def test_custom_edges_and_validation():
    assert concurrency_band(20, (16, 64)) == "17-64"
    assert band_labels((16, 64)) == ["1-16", "17-64", ">64"]
    with pytest.raises(ValueError):
        concurrency_band(5, (32, 8))
    with pytest.raises(ValueError):
        band_labels(())
