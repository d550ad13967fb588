"""One module per checkpoint layout, plus the layout registry and the shared codecs."""
