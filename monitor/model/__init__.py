"""The contracts between the stages: what collectors observe (``observations``), what the
evaluation concludes (``verdicts``) and its JSON in Burrow's shape (``status_json``). Plain data,
imported by every stage, importing no other."""
