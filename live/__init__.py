"""A live class, as plain Python: its rules (`rules`: the classes, their views, questions and answers), where they
are kept (`store`: this server's memory or a Redis server every replica shares) and who is told when one moves
(`push`: the followers of each class on this server). No streamlit: ui/class_session.py is a browser session's
part in a class, ui/class_live.py draws it on the page, and ui/streamlit_private.py is the one place that asks
Streamlit for a session's rerun."""
