"""What kiln's processes say to each other, below the front and the zygote alike: the frame codec
with a slot's job and result (protocol.py, kiln-init's side in kiln/native/frames.c), and the
front <-> zygote messages (messages.py). Imports nothing of kiln above it."""
