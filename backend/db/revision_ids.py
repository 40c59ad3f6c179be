"""Migration ids that were renamed: old id (a database may still hold it) -> new id. `specwatch migrate`
(migrations/env.py) rewrites an old id before upgrading; /ready reads one as its new id."""

RENAMED = {
    "i26b_outbox_doubt": "2026_12_02_outbox_doubt",
    "i26a_token_expiry": "2026_12_02_token_expiry",
    "i29_per_request": "2026_12_02_per_request",
    "i26c_data_version": "2026_12_02_data_version",
    "i30a_replicas": "2026_12_02_replicas",
    "i29b_cheap_inserts": "2026_12_02_cheap_inserts",
    "i31a_columnar_scrapes": "2026_12_03_columnar_scrapes",
    "i45e_model_senders": "2026_12_05_model_senders",
    "i46a_records_source": "2026_12_05_records_source",
}
