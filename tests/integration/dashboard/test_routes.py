"""Every view is served at its own URL path ("/profiles" too, besides "/"), in local and in share mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.frame import VIEWS


def _routes(share: bool) -> list[tuple[str, bool, str]]:
    """(url path, default?, script file name) of each page ``nav_pages`` gives, in order (st.Page needs a run)."""

    def script(share):
        from pathlib import Path

        import streamlit as st

        from dashboard.access import Access
        from dashboard.frame import nav_pages

        acc = Access(share_dir=Path("/srv/share"), live=False) if share else Access()
        st.session_state["routes"] = [(p.url_path, p._default, Path(str(getattr(p, "_page", ""))).name)
                                      for p in nav_pages(acc)]

    at = AppTest.from_function(script, args=(share,), default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    return at.session_state["routes"]


@pytest.mark.parametrize("share", [False, True], ids=["local", "share"])
def test_each_view_answers_at_its_url_path(share):
    routes = _routes(share)
    served = {url for url, _default, _name in routes}
    assert [url for url, default, _name in routes if default] == [""]  # the default page, at "/"
    missing = [url for _script, _title, _icon, url in VIEWS if url not in served]
    assert not missing, f"no page answers at /{', /'.join(missing)}"
    # st.page_link / st.switch_page take a script's first page: Profiles' first is the default, at "/"
    first = next(url for url, _default, name in routes if name == Path(VIEWS[0][0]).name)
    assert first == ""
