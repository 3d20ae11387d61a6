#!/usr/bin/python3
"""TLS and mutual TLS with curl as the client, certificates made here with
openssl: HTTPS answers with the CA's certificate trusted, a client that
does not trust it fails the handshake, plain HTTP to the TLS port gets no
HTTP answer and the server keeps serving; with --tls-client-ca, a request
without a client certificate, or with one another CA signed, gets 403
and one with a certificate the CA signed is served. A key file that is not
PEM is refused at start.

usage: tls.py PACKRAT
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
d = c.tmp


def sh(*args):
    subprocess.run(args, check=True, capture_output=True, cwd=d)


def make_ca(name):
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
       "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN={name}")


def make_cert(name, ca, ext):
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext)
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
       "-out", f"{name}.csr", "-subj", f"/CN={name}")
    sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
       "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext")


make_ca("ca")
make_ca("otherca")
make_cert("server", "ca", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
make_cert("client", "ca", "extendedKeyUsage=clientAuth\n")
make_cert("stranger", "otherca", "extendedKeyUsage=clientAuth\n")
repo = c.make_repo(os.path.join(d, "models"), config={"max_batch_size": 2, "plan": "1x2"})
f = lambda n: os.path.join(d, n)  # noqa: E731


def start(extra):
    port = c.free_port()
    log = f(f"serve-{port}.log")
    p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port),
                 "--tls-cert", f("server.pem"), "--tls-key", f("server.key"), *extra], log)
    for _ in range(600):
        if b"ready: https://" in open(log, "rb").read() or p.poll() is not None:
            break
        time.sleep(0.1)
    return p, port


def curl(port, path, *args, body=None, scheme="https"):
    cmd = ["curl", "-s", "-o", f("body"), "-w", "%{http_code}", "--max-time", "20", *args,
           f"{scheme}://127.0.0.1:{port}{path}"]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", body]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout.strip()


body = c.MLP_BODY.decode()
p, port = start([])
c.check("HTTPS: ready", curl(port, "/v2/health/ready", "--cacert", f("ca.pem")) == (0, "200"))
c.check("HTTPS: infer", curl(port, "/v2/models/mlp/infer", "--cacert", f("ca.pem"), body=body)
        == (0, "200"))
rc, _ = curl(port, "/v2/health/ready")
c.check(f"a client that does not trust the CA fails the handshake (curl exit {rc})", rc == 60)
rc, code = curl(port, "/v2/health/ready", scheme="http")
c.check(f"plain HTTP to the TLS port: no HTTP answer (curl exit {rc}, code {code})",
        rc != 0 and code in ("", "000"))
c.check("still serving after the plain-HTTP attempt",
        curl(port, "/v2/health/ready", "--cacert", f("ca.pem")) == (0, "200"))
p.terminate()
c.check("exit 0", p.wait(60) == 0)

p, port = start(["--tls-client-ca", f("ca.pem")])
mine = ["--cacert", f("ca.pem"), "--cert", f("client.pem"), "--key", f("client.key")]
c.check("mTLS: a client certificate the CA signed is served",
        curl(port, "/v2/models/mlp/infer", *mine, body=body) == (0, "200"))
rc, code = curl(port, "/v2/models/mlp/infer", "--cacert", f("ca.pem"), body=body)
c.check(f"mTLS: no client certificate: 403 ({rc}, {code})", (rc, code) == (0, "403"))
stranger = ["--cacert", f("ca.pem"), "--cert", f("stranger.pem"), "--key", f("stranger.key")]
rc, code = curl(port, "/v2/models/mlp/infer", *stranger, body=body)
c.check(f"mTLS: another CA's certificate refused ({rc}, {code})",
        code == "403" or (rc != 0 and code in ("", "000")))
c.check("mTLS: still serving", curl(port, "/v2/health/ready", *mine) == (0, "200"))
p.terminate()
c.check("exit 0", p.wait(60) == 0)

with open(f("notpem.key"), "w") as fh:
    fh.write("not a key\n")
r = subprocess.run([packrat, "serve", "--model-repository", repo, "--http-port", "0",
                    "--tls-cert", f("server.pem"), "--tls-key", f("notpem.key")],
                   capture_output=True, text=True, timeout=60)
c.check("a key that is not PEM: exit 1 with a message", r.returncode == 1 and "PEM" in r.stderr,
        r.stderr[-300:])
c.finish()
