"""Reusable widgets: each knows how to show one kind of thing and posts messages
(screens/messages.py); none reaches into a screen."""
