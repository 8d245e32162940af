from webhooks.signature import signature_for, signature_valid

# GitHub's documented test vector (Validating webhook deliveries).
SECRET = "It's a Secret to Everybody"
BODY = b"Hello, World!"
EXPECTED = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_it_matches_githubs_documented_test_vector():
    assert signature_for(SECRET, BODY) == EXPECTED
    assert signature_valid(SECRET, BODY, EXPECTED)


def test_it_rejects_a_body_changed_by_one_byte():
    assert not signature_valid(SECRET, b"Hello, World?", EXPECTED)


def test_it_rejects_a_signature_changed_by_one_character():
    tampered = EXPECTED[:-1] + ("6" if EXPECTED[-1] != "6" else "7")
    assert not signature_valid(SECRET, BODY, tampered)


def test_it_rejects_missing_or_legacy_sha1_headers_and_an_empty_secret():
    assert not signature_valid(SECRET, BODY, None)
    assert not signature_valid(SECRET, BODY, "")
    assert not signature_valid(SECRET, BODY, "sha1=" + EXPECTED.removeprefix("sha256="))
    assert not signature_valid("", BODY, EXPECTED)


def test_a_signature_with_non_ascii_characters_is_refused_not_raised():
    # A WSGI server hands headers over as latin-1 text: any byte can arrive.
    assert not signature_valid(SECRET, BODY, EXPECTED[:-1] + "é")
    assert not signature_valid(SECRET, BODY, "sha256=" + "ü" * 64)
    assert not signature_valid(SECRET, BODY, "sha256=\udcff")
