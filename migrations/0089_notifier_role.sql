-- The `notifier` role (between `reader` and `operator`): what a notification delivery worker
-- does, and nothing that records or changes an investigation. Widens the role checks of
-- `api_tokens` and `event_stream_tickets`: each is dropped and added again, which reads the
-- table once under ACCESS EXCLUSIVE (both are small: a row per API token, and per stream
-- ticket of the last minutes). Older binaries refuse a `notifier` token as an unknown role.
SET LOCAL lock_timeout = '5s';

ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check,
    ADD CONSTRAINT api_tokens_role_check
        CHECK (role IN ('reader', 'notifier', 'operator', 'writer', 'admin'));
ALTER TABLE event_stream_tickets DROP CONSTRAINT event_stream_tickets_role_check,
    ADD CONSTRAINT event_stream_tickets_role_check
        CHECK (role IN ('reader', 'notifier', 'operator', 'writer', 'admin'));
