#!/usr/bin/env bash
# The README's first command: set everything up and run the guides' scale-up
# and scale-down walkthrough on a local control plane, with Joiner's AWS
# provider launching EC2 instances from the local AWS endpoint (cmd/fake-aws:
# moto behind a thin front, whose instances boot into Nodes from the user data
# Joiner wrote).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source hack/versions.sh

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

step "Building the control plane (first run only) and starting it on loopback"
kubeconfig="$(JOINER_SETUP_VERBOSE=1 go run ./hack/cluster up)"
export KUBECONFIG="$kubeconfig"
export PATH="$KUBE_BIN_DIR:$PATH"
state="$(dirname "$kubeconfig")"
go build -o bin/joiner ./cmd/joiner
go build -o bin/fake-aws ./cmd/fake-aws

step "Starting the local AWS endpoint (cmd/fake-aws: moto plus a front, docs/fake-aws.md)"
# It lives as long as the control plane (make down stops both): its instances
# are the cluster's Nodes.
if alive "$state/fake-aws.pid" && [ -s "$state/fake-aws.url" ]; then
  echo "reusing the running one"
else
  rm -f "$state/fake-aws.url"
  # 127.0.0.1:0 picks a free port, so a second cluster on the machine does not clash.
  setsid ./bin/fake-aws --cluster-name demo --region us-east-1 --kubeconfig "$KUBECONFIG" \
    --listen "127.0.0.1:${JOINER_AWS_PORT:-0}" --call-log "$state/aws-calls.jsonl" \
    > "$state/fake-aws.url" 2> "$state/fake-aws.log" < /dev/null &
  echo $! > "$state/fake-aws.pid"
  for i in $(seq 1 120); do
    grep -q '^AWS_ENDPOINT_URL=' "$state/fake-aws.url" 2>/dev/null && break
    if ! alive "$state/fake-aws.pid"; then
      echo "fake-aws did not start:" >&2
      tail -5 "$state/fake-aws.log" >&2
      exit 1
    fi
    sleep 1
  done
fi
endpoint="$(sed -n 's/^AWS_ENDPOINT_URL=//p' "$state/fake-aws.url")"
if [ -z "$endpoint" ]; then
  echo "fake-aws printed no endpoint after 2 minutes; its log ends with:" >&2
  tail -5 "$state/fake-aws.log" >&2
  exit 1
fi
# What a user's environment on EKS would hold, but for the endpoint: the
# SDK's standard variable, as for a VPC endpoint.
export AWS_ENDPOINT_URL="$endpoint" AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
# The AWS CLI (v1) reads the region from AWS_DEFAULT_REGION only.
export AWS_DEFAULT_REGION=$AWS_REGION
echo "AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL (moto seeded with 3 subnets and a security group tagged karpenter.sh/discovery=demo,"
echo "  the role KarpenterNodeRole-demo, the EKS cluster demo, the queue demo and the EKS node images)"

step "Starting Joiner: --cloud-provider=aws, CLUSTER_NAME=demo, INTERRUPTION_QUEUE=demo"
if [ -f "$state/joiner.pid" ]; then kill "$(cat "$state/joiner.pid")" 2>/dev/null || true; sleep 1; fi
# Random ports unless asked for, so a second cluster on the machine does not clash.
CLOUD_PROVIDER=aws CLUSTER_NAME=demo INTERRUPTION_QUEUE=demo \
  METRICS_PORT="${JOINER_METRICS_PORT:-0}" HEALTH_PROBE_PORT="${JOINER_HEALTH_PORT:-0}" DISABLE_LEADER_ELECTION=true \
  setsid ./bin/joiner > "$state/joiner.log" 2>&1 < /dev/null &
echo $! > "$state/joiner.pid"
sleep 2
if ! kill -0 "$(cat "$state/joiner.pid")" 2>/dev/null; then
  echo "Joiner did not start:" >&2
  tail -5 "$state/joiner.log" >&2
  exit 1
fi
echo "logs: $state/joiner.log"
grep -m1 '"message":"aws cloud provider"' "$state/joiner.log" | grep -o '"cluster-endpoint":"[^"]*"' \
  | sed 's/^/CLUSTER_ENDPOINT unset, so found with eks:DescribeCluster: /' || true

step "kubectl apply -f test/testdata/seed-manifests/03-scale-up-down.yaml"
kubectl apply -f test/testdata/seed-manifests/03-scale-up-down.yaml

step "The EC2NodeClass resolves: subnets, security groups, AMIs (al2023@latest from SSM) and an instance profile"
kubectl wait --for=condition=Ready ec2nodeclass/default --timeout=120s >/dev/null
kubectl get ec2nodeclass default -o jsonpath='{range .status.subnets[*]}  subnet          {.id}  {.zone} ({.zoneID}){"\n"}{end}{range .status.securityGroups[*]}  security group  {.id}  {.name}{"\n"}{end}{range .status.amis[*]}  AMI             {.id}  {.name}{"\n"}{end}  instance profile {.status.instanceProfile}{"\n"}'

step "Waiting for the 5 inflate pods to run"
for i in $(seq 1 180); do
  running=$(kubectl get pods -l app=inflate --field-selector=status.phase=Running --no-headers 2>/dev/null | wc -l)
  [ "$running" -ge 5 ] && break
  sleep 1
done
if [ "$running" -lt 5 ]; then
  echo "only $running of 5 pods run after 3 minutes; Joiner's log ends with:" >&2
  tail -5 "$state/joiner.log" >&2
  exit 1
fi
kubectl wait --for=condition=Ready nodeclaims --all --timeout=60s >/dev/null

instances() {
  # awscli is a second client of the endpoint, as it would be of EC2.
  if ! command -v aws >/dev/null 2>&1; then
    echo "  (the AWS CLI is not installed: pip install awscli)"
    return
  fi
  aws ec2 describe-instances --filters Name=tag:karpenter.sh/nodepool,Values=default \
    --query "Reservations[].Instances[].[InstanceId,InstanceType,Placement.AvailabilityZone,State.Name,Tags[?Key=='karpenter.sh/nodeclaim']|[0].Value]" \
    --output text | sort -k4 | column -t | sed 's/^/  /'
}
step "aws ec2 describe-instances (awscli against AWS_ENDPOINT_URL): the instance Joiner launched"
instances

step "EC2 calls so far (the endpoint's call log, $state/aws-calls.jsonl)"
grep -o '"service":"ec2","action":"[A-Za-z]*"' "$state/aws-calls.jsonl" | sed 's/.*"action":"//; s/"//' | sort | uniq -c | sort -rn | sed 's/^ */  /'

step "The node joined from the user data Joiner wrote (nodeadm NodeConfig: labels, taints, max pods, reserved)"
kubectl get nodes -l karpenter.sh/nodepool=default \
  -o custom-columns='NAME:.metadata.name,PROVIDER-ID:.spec.providerID,TYPE:.metadata.labels.node\.kubernetes\.io/instance-type,PODS:.status.allocatable.pods,CPU:.status.allocatable.cpu'

step "kubectl get nodeclaims"
kubectl get nodeclaims

step "kubectl get pods -o wide"
kubectl get pods -o wide

step "What Joiner logged"
grep -E '"message":"(found provisionable pod\(s\)|computed new nodeclaim\(s\) to fit pod\(s\)|created nodeclaim|launched nodeclaim|registered nodeclaim|initialized nodeclaim)"' "$state/joiner.log" \
  | sed -E 's/.*"message":"([^"]*)".*/  \1/' | uniq || true

step "The same plan, offline: joiner plan -f test/testdata/seed-manifests/03-scale-up-down.yaml"
./bin/joiner plan -f test/testdata/seed-manifests/03-scale-up-down.yaml

step "Scale down: kubectl scale deployment/inflate --replicas 1"
echo "(the demo shortens the guide's consolidateAfter from 1m to 10s so you need not wait)"
kubectl patch nodepool default --type=merge -p '{"spec":{"disruption":{"consolidateAfter":"10s"}}}' >/dev/null
old=$(kubectl get nodeclaims -o jsonpath='{.items[0].metadata.name}')
old_instance=$(kubectl get nodeclaim "$old" -o jsonpath='{.status.providerID}'); old_instance=${old_instance##*/}
kubectl scale deployment/inflate --replicas 1
for i in $(seq 1 180); do
  now=$(kubectl get nodeclaims -o jsonpath='{.items[*].metadata.name}')
  running=$(kubectl get pods -l app=inflate --field-selector=status.phase=Running --no-headers 2>/dev/null | wc -l)
  if [ -n "$now" ] && [ "$now" != "$old" ] && [ "$(echo "$now" | wc -w)" -eq 1 ] && [ "$running" -eq 1 ]; then break; fi
  sleep 1
done
for i in $(seq 1 60); do
  command -v aws >/dev/null 2>&1 || break
  [ "$(aws ec2 describe-instances --instance-ids "$old_instance" --query 'Reservations[].Instances[].State.Name' --output text)" = terminated ] && break
  sleep 1
done

step "Joiner replaced the node with a cheaper one"
grep -E '"message":"(disrupting nodeclaim|tainted node|deleted node|deleted nodeclaim)' "$state/joiner.log" \
  | sed -E 's/.*"message":"([^"]*)".*/  \1/' | uniq || true

step "aws ec2 describe-instances: the first instance ($old_instance) is terminated"
instances

step "kubectl get nodeclaims"
kubectl get nodeclaims

step "kubectl get pods -o wide"
kubectl get pods -o wide

cat <<MSG

The control plane, the AWS endpoint and Joiner keep running. Try it yourself:
  export KUBECONFIG=$KUBECONFIG PATH=$KUBE_BIN_DIR:\$PATH
  export AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
  kubectl scale deployment/inflate --replicas 20 && kubectl get nodeclaims -w
  go run ./cmd/joiner viewer --resources cpu,memory   # live nodes, prices, utilisation; q quits
  aws ec2 describe-instances --output table
  curl -X PUT \$AWS_ENDPOINT_URL/_fake/faults -d '{"insufficientCapacity":[{"instanceType":"c6a.large"}]}'   # docs/fake-aws.md
Stop everything with: make down
MSG
