"""The one wire schema: msgpack frames, an append-only message-type enum, one decode point."""
