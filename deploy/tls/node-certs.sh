#!/usr/bin/env bash
# Writes a client certificate for the zonemesh agent of each node, signed by the zonemesh CA:
#
#   <out>/<node>/tls.crt   EC P-256, URI SAN spiffe://<domain>/node/<node>, extendedKeyUsage clientAuth
#   <out>/<node>/tls.key   its private key (PKCS#8, mode 0600)
#   <out>/<node>/ca.crt    the CA certificate (the agent checks the aggregator's certificate with it)
#
# Copy each directory to /etc/zonemesh/pki on its node (deploy/README.md, "Mutual TLS").
# Run it again before the certificates expire: it overwrites them.
set -euo pipefail
# Character ranges in the checks below mean ASCII whatever the caller's locale.
export LC_ALL=C

usage() {
    cat <<'EOF'
Usage: node-certs.sh [options] [NODE...]

Writes <out>/<node>/{tls.crt,tls.key,ca.crt} for each NODE, signed by the zonemesh CA.

NODE...            node names (DNS-1123 subdomains, as Kubernetes requires);
                   default: every node of `kubectl get nodes -o name`.
--ca-cert FILE     the CA certificate (PEM)   } both, or neither: then they are read
--ca-key FILE      the CA private key (PEM)   } from the Secret with kubectl
--secret NAME      the CA Secret (default: zonemesh-ca, made by cert-manager)
-n, --namespace NS its namespace (default: zonemesh)
-o, --out DIR      where to write (default: ./node-certs)
--days N           validity in days (default: 365)
--domain NAME      trust domain of the identity URI (default: zonemesh)
-h, --help         this text
EOF
}

die() {
    echo "node-certs.sh: $*" >&2
    exit 1
}

need_value() {
    if [ "$#" -lt 2 ] || [ -z "$2" ]; then
        die "$1 needs a value (--help for usage)"
    fi
}

ca_cert=
ca_key=
secret=zonemesh-ca
namespace=zonemesh
out=./node-certs
days=365
domain=zonemesh
nodes=()

while [ "$#" -gt 0 ]; do
    case "$1" in
        --ca-cert) need_value "$@"; ca_cert=$2; shift 2 ;;
        --ca-key) need_value "$@"; ca_key=$2; shift 2 ;;
        --secret) need_value "$@"; secret=$2; shift 2 ;;
        --namespace | -n) need_value "$@"; namespace=$2; shift 2 ;;
        --out | -o) need_value "$@"; out=$2; shift 2 ;;
        --days) need_value "$@"; days=$2; shift 2 ;;
        --domain) need_value "$@"; domain=$2; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        --) shift; nodes+=("$@"); break ;;
        -*) die "unknown option $1 (--help for usage)" ;;
        *) nodes+=("$1"); shift ;;
    esac
done

command -v openssl >/dev/null || die "openssl is not installed"

[[ "$days" =~ ^[1-9][0-9]{0,4}$ ]] || die "--days $days: not a whole number of days between 1 and 99999"

# The trust domain of a SPIFFE ID: lower-case letters, digits, '.', '-' and '_'.
[[ "$domain" =~ ^[a-z0-9._-]+$ ]] \
    || die "--domain $domain: a trust domain has only lower-case letters, digits, '.', '-' and '_'"

# A node name as Kubernetes checks it (IsDNS1123Subdomain): at most 253 characters of lower-case
# letters, digits, '-' and '.', in labels that start and end with a letter or digit.
check_node() {
    local name=$1 label='[a-z0-9]([-a-z0-9]*[a-z0-9])?'
    if [ -z "$name" ]; then
        die "an empty node name"
    elif [ "${#name}" -gt 253 ]; then
        die "node name $name: ${#name} characters, at most 253"
    elif [[ "$name" =~ [[:upper:]] ]]; then
        die "node name $name: upper-case letters (Kubernetes node names are lower case)"
    elif [[ "$name" =~ [^a-z0-9.-] ]]; then
        die "node name $name: only lower-case letters, digits, '-' and '.' are allowed"
    elif ! [[ "$name" =~ ^$label(\.$label)*$ ]]; then
        die "node name $name: each dot-separated part must start and end with a letter or digit"
    fi
}

# Names given as arguments are checked before anything else is done.
for node in "${nodes[@]+"${nodes[@]}"}"; do
    check_node "$node"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"

# The CA: files given, or the Secret's tls.crt and tls.key.
if [ -n "$ca_cert" ] || [ -n "$ca_key" ]; then
    [ -n "$ca_cert" ] || die "--ca-key needs --ca-cert too"
    [ -n "$ca_key" ] || die "--ca-cert needs --ca-key too"
    [ -r "$ca_cert" ] || die "--ca-cert $ca_cert: no such readable file"
    [ -r "$ca_key" ] || die "--ca-key $ca_key: no such readable file"
else
    command -v kubectl >/dev/null \
        || die "kubectl is not installed: give the CA with --ca-cert and --ca-key"
    for key in tls.crt tls.key; do
        kubectl -n "$namespace" get secret "$secret" -o "jsonpath={.data.${key//./\\.}}" \
            >"$work/$key.b64" \
            || die "cannot read Secret $namespace/$secret (is cert-manager's zonemesh-ca Certificate ready?)"
        [ -s "$work/$key.b64" ] || die "Secret $namespace/$secret has no $key"
        base64 -d <"$work/$key.b64" >"$work/ca-$key" \
            || die "Secret $namespace/$secret: $key is not base64"
    done
    ca_cert=$work/ca-tls.crt
    ca_key=$work/ca-tls.key
fi

openssl x509 -in "$ca_cert" -noout 2>/dev/null \
    || die "CA certificate $ca_cert: not a PEM certificate"
openssl pkey -in "$ca_key" -noout 2>/dev/null \
    || die "CA key $ca_key: not a PEM private key (or it is encrypted)"
if [ "$(openssl x509 -in "$ca_cert" -noout -pubkey)" != "$(openssl pkey -in "$ca_key" -pubout)" ]; then
    die "CA key $ca_key does not belong to CA certificate $ca_cert"
fi
ca_text=$(openssl x509 -in "$ca_cert" -noout -text)
[[ "$ca_text" == *CA:TRUE* ]] \
    || die "CA certificate $ca_cert is not a CA (basicConstraints CA:TRUE is missing)"
openssl x509 -in "$ca_cert" -noout -checkend $((days * 86400)) >/dev/null \
    || echo "node-certs.sh: warning: the CA certificate expires within $days days, before these certificates" >&2

# The nodes: given, or all the cluster's.
if [ "${#nodes[@]}" -eq 0 ]; then
    command -v kubectl >/dev/null \
        || die "kubectl is not installed: name the nodes as arguments"
    kubectl get nodes -o name >"$work/nodes" || die "kubectl get nodes failed"
    while IFS= read -r line; do
        [ -n "$line" ] && nodes+=("${line#node/}")
    done <"$work/nodes"
    [ "${#nodes[@]}" -gt 0 ] || die "kubectl get nodes listed no node"
    for node in "${nodes[@]}"; do
        check_node "$node"
    done
fi

mkdir -p "$out" || die "--out $out: cannot create the directory"
umask 077
for node in "${nodes[@]}"; do
    uri="spiffe://$domain/node/$node"
    tmp=$work/$node
    mkdir -p "$tmp"
    cat >"$tmp/ext.cnf" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = URI:$uri
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/tls.key" 2>/dev/null \
        || die "$node: openssl could not make an EC P-256 key"
    openssl req -new -key "$tmp/tls.key" -subj "/CN=$node" -out "$tmp/req.csr" \
        || die "$node: openssl could not make the request"
    # A random positive serial of 127 bits (RFC 5280 allows up to 20 octets).
    serial=$(openssl rand -hex 16)
    serial=$(printf '%x%s' $((0x${serial:0:1} & 7)) "${serial:1}")
    openssl x509 -req -in "$tmp/req.csr" -CA "$ca_cert" -CAkey "$ca_key" -set_serial "0x$serial" \
        -days "$days" -sha256 -extfile "$tmp/ext.cnf" -out "$tmp/tls.crt" 2>"$tmp/x509.err" \
        || die "$node: openssl could not sign the certificate: $(cat "$tmp/x509.err")"
    openssl verify -CAfile "$ca_cert" -purpose sslclient "$tmp/tls.crt" >/dev/null \
        || die "$node: the new certificate does not verify against $ca_cert"
    dir=$out/$node
    mkdir -p "$dir"
    cp "$ca_cert" "$dir/ca.crt.new"
    cp "$tmp/tls.crt" "$dir/tls.crt.new"
    cp "$tmp/tls.key" "$dir/tls.key.new"
    chmod 644 "$dir/ca.crt.new" "$dir/tls.crt.new"
    chmod 600 "$dir/tls.key.new"
    mv -f "$dir/ca.crt.new" "$dir/ca.crt"
    mv -f "$dir/tls.key.new" "$dir/tls.key"
    mv -f "$dir/tls.crt.new" "$dir/tls.crt"
    echo "$dir: $uri, until $(openssl x509 -in "$dir/tls.crt" -noout -enddate | cut -d= -f2)"
done
