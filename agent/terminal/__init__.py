"""What reaches a person: text made printable (``printable``), the live view of a campaign (``live``)
and its estimate of the time left (``live_eta``)."""
