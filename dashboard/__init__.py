"""The dashboard's frame (Streamlit): access mode, navigation, cached store reads, URL state, layout and exports.

``app.py`` builds the frame; ``pages/*.py`` render one view each. Numbers come from
``sago_engine``; this package holds no SQL and no statistics.
"""
