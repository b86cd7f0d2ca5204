"""A reverse proxy that lets a request through only when botocore, AWS's own Python signer,
computes the same SigV4 signature for it: the check AWS makes, done by an implementation
independent of the one under test. Refused requests get 403 and a JSON reason.

It also answers STS `AssumeRole` (form-encoded, the SDKs' query protocol), signed requests
only, with the temporary credentials it was given, and then accepts those (with their session
token) like its other keys.

Argument: a JSON object with `upstream` (base URL requests go to), `strip` (a path prefix
removed before forwarding), `service` and `region` (what signatures must be scoped to),
`keys` ({access key id: secret}) and `role` (null, or {key, secret, token}).
`GET /_log` answers what was seen, unsigned. The chosen port is printed on the first line.
"""

import datetime
import json
import re
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

CONFIG = json.loads(sys.argv[1])
KEYS = {key: {"secret": secret, "token": None} for key, secret in CONFIG["keys"].items()}
ROLE = CONFIG.get("role")
LOG = []
LOCK = threading.Lock()

AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, ?"
    r"SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$"
)


def check(handler, body, service):
    """The access key id and None when the signature is right, else the key (or None) and why."""
    match = AUTHORIZATION.match(handler.headers.get("Authorization", ""))
    if not match:
        return None, "no SigV4 Authorization header"
    key_id, day, region, scope_service, signed, signature = match.groups()
    if scope_service != service:
        return key_id, f"signed for service {scope_service}, not {service}"
    if region != CONFIG["region"]:
        return key_id, f"signed for region {region}, not {CONFIG['region']}"
    with LOCK:
        key = KEYS.get(key_id)
    if key is None:
        return key_id, f"unknown access key {key_id}"
    amz_date = handler.headers.get("X-Amz-Date", "")
    if not amz_date.startswith(day):
        return key_id, "X-Amz-Date is not the day of the credential scope"
    try:
        when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    except ValueError:
        return key_id, f"X-Amz-Date {amz_date!r} is not a SigV4 time"
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    if abs((now - when).total_seconds()) > 900:
        return key_id, "the signature is more than 15 minutes off"
    names = signed.split(";")
    if "host" not in names:
        return key_id, "host is not signed"
    if key["token"] is not None:
        if "x-amz-security-token" not in names:
            return key_id, "the session token is not signed"
        if handler.headers.get("X-Amz-Security-Token") != key["token"]:
            return key_id, "wrong session token"
    headers = {}
    for name in names:
        value = handler.headers.get(name)
        if value is None:
            return key_id, f"signed header {name} is missing"
        headers[name] = value
    url = f"http://{handler.headers['Host']}{handler.path}"
    request = AWSRequest(method=handler.command, url=url, data=body, headers=headers)
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(key_id, key["secret"], key["token"]), service, region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if expected != signature:
        return key_id, "SignatureDoesNotMatch: the signature botocore calculates differs"
    return key_id, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self, **entry):
        with LOCK:
            LOG.append(entry)

    def do_GET(self):
        if self.path == "/_log":
            with LOCK:
                return self.reply(200, json.dumps(LOG))
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        form = {}
        if self.command == "POST" and self.path == "/":
            form = dict(urllib.parse.parse_qsl(body.decode(errors="replace")))
        if form.get("Action") == "AssumeRole":
            return self.assume_role(body, form)
        key, why = check(self, body, CONFIG["service"])
        self.record(service=CONFIG["service"], key=key, path=self.path, refused=why)
        if why is not None:
            return self.reply(403, json.dumps({"message": why}))
        if not self.path.startswith(CONFIG["strip"]):
            return self.reply(404, json.dumps({"message": f"no route for {self.path}"}))
        rest = self.path[len(CONFIG["strip"]):]
        forward = urllib.request.Request(
            CONFIG["upstream"] + rest,
            data=body if self.command == "POST" else None,
            method=self.command,
        )
        if self.headers.get("Content-Type"):
            forward.add_header("Content-Type", self.headers["Content-Type"])
        try:
            with urllib.request.urlopen(forward, timeout=30) as answer:
                status, data = answer.status, answer.read()
                content_type = answer.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as err:
            status, data = err.code, err.read()
            content_type = err.headers.get("Content-Type", "application/json")
        self.reply(status, data, content_type)

    def assume_role(self, body, form):
        key, why = check(self, body, "sts")
        self.record(
            service="sts",
            key=key,
            path=self.path,
            refused=why,
            role_arn=form.get("RoleArn"),
            session_name=form.get("RoleSessionName"),
        )
        if why is not None:
            error = (
                '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
                f"<Type>Sender</Type><Code>SignatureDoesNotMatch</Code><Message>{why}</Message>"
                "</Error><RequestId>r</RequestId></ErrorResponse>"
            )
            return self.reply(403, error, "text/xml")
        if ROLE is None:
            return self.reply(400, "<ErrorResponse><Error><Code>NoRole</Code></Error></ErrorResponse>", "text/xml")
        with LOCK:
            KEYS[ROLE["key"]] = {"secret": ROLE["secret"], "token": ROLE["token"]}
        answer = (
            '<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleResult><Credentials>"
            f"<AccessKeyId>{ROLE['key']}</AccessKeyId>"
            f"<SecretAccessKey>{ROLE['secret']}</SecretAccessKey>"
            f"<SessionToken>{ROLE['token']}</SessionToken>"
            "<Expiration>2099-01-01T00:00:00Z</Expiration>"
            "</Credentials><AssumedRoleUser>"
            f"<Arn>{form.get('RoleArn', '')}/session</Arn><AssumedRoleId>AROA:session</AssumedRoleId>"
            "</AssumedRoleUser></AssumeRoleResult>"
            "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleResponse>"
        )
        self.reply(200, answer, "text/xml")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
