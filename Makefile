# The two commands the README gives are `make demo` and `make test`.
SHELL := /bin/bash

.PHONY: race demo test simulate-fidelity soak chaos scale scale-down optimum optimum-random optimum-random-commitments optimum-commitments reliability fuzz bench-aws least-privilege karpenter-e2e image generate verify-generated setup down fmt

## demo: set everything up and run the demo on a local control plane, with
## Joiner's aws provider against the local AWS endpoint (cmd/fake-aws)
demo:
	./hack/demo.sh

## test: run every test, unit and integration, building what they need first.
## Four packages at a time: the integration packages each run a control
## plane and spend most of their time waiting on it, so on 2 cores four
## overlap better than go test's default of two (one per core).
##
## test/aws runs as two processes, each with its own control plane and AWS
## endpoint: its tests run one after another and wait on them (21 minutes
## alone), so its IAM tests and the commitments' test (AWS_IAM_TESTS, about
## 15 minutes; each starts an endpoint of its own) run beside the rest.
## A test added to test/aws runs with the rest unless listed there.
AWS_IAM_TESTS = ^(TestGuideUnderPublishedPolicies|TestDeniedAtStart|TestDeniedAfterLaunch|TestBadInputNamesTheFixAndLaunchesNothing|TestSpotServiceLinkedRoleMissing|TestCommitmentsInPlans|TestSpendCap)$$
test: setup
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	# The longest packages first, so that they start at once rather than
	# behind the quick ones (go test runs packages in the order given).
	# -timeout guards against a hung package, not the budget: the budget
	# (25 minutes for all of it) is measured, docs/long-tests.md, and the
	# longest packages run at 20 minutes or more when two cores are busy.
	go test -count=1 -timeout 40m -run '$(AWS_IAM_TESTS)' ./test/aws/ & iam=$$!; \
	  go test -count=1 -p 4 -timeout 40m -skip '$(AWS_IAM_TESTS)' ./test/aws/ ./test/consolidation/ ./test/provisioning/ ./test/disruption/ ./...; rest=$$?; \
	  wait $$iam; iam=$$?; \
	  if [ $$iam -ne 0 ]; then echo "test/aws's IAM tests failed (AWS_IAM_TESTS)"; fi; \
	  exit $$(( rest != 0 || iam != 0 ))

## race: the race detector over the packages that run goroutines of their
## own (the operator's wiring, the controllers, the planner, the cluster
## state, the AWS provider, the simulator and its LP-bound goroutine);
## .ci/run runs it after make test. Its time is in
## docs/long-tests.md.
RACE_PACKAGES = ./pkg/operator/... ./pkg/controllers/... ./pkg/scheduling/... ./pkg/disruption/... ./pkg/state/... ./pkg/cloudprovider/aws/... ./pkg/simulate/...
race: setup
	go test -race -count=1 -p 2 -timeout 40m $(RACE_PACKAGES)

## simulate-fidelity: one generated 2-hour trace (a random walk of 20
## Deployments, peak 150 pods) replayed live on the local control plane with
## kwok and Joiner, six times faster (consolidateAfter 10s), and in joiner
## simulate; node-hours, cost, evictions and peak nodes of both go to
## .cache/fidelity.md and the log (-tags fidelity, test/simulate). About 25
## minutes; docs/simulate.md has the figures.
simulate-fidelity: setup
	go vet -tags fidelity ./test/simulate/
	FIDELITY_OUT=$(abspath .cache) go test -tags fidelity -count=1 -timeout 60m -v -run '^TestFidelity$$' ./test/simulate/

## soak: the steady-state test's full 30-minute watch (-tags long), outside
## make test; about 40 minutes. docs/long-tests.md has its figures.
soak: setup
	go vet -tags long ./test/consolidation/
	go test -tags long -count=1 -timeout 60m -v -run '^TestSteadyState$$' ./test/consolidation/

## chaos (-tags chaos), outside make test, two runs:
##  - TestChaos: guide 03 up and down CHAOS_ROUNDS times (default 4)
##    through the aws provider while every AWS call risks throttling, 5xx
##    before or after it took effect, latency and eventual consistency, with
##    Joiner killed mid-launch once; about 10 minutes (docs/long-tests.md);
##  - TestKubernetesChaos: CHAOS_KILLS (default 50) kills of Joiner across
##    launch, interruption, drain, replace and delete, API write failures,
##    100 spot interruptions in 10 s, instances terminated out of band and a
##    kubelet dead mid-drain (docs/reliability.md).
chaos: setup
	go vet -tags chaos ./test/aws/
	go test -tags chaos -count=1 -timeout 90m -v -run '^(TestChaos|TestKubernetesChaos)$$' ./test/aws/

## scale: the controller at 1,000 nodes and 10,000 pods (-tags scale,
## test/scale): 10,000 pending pods of 50 shapes across three NodePools to
## NodeClaims and Running pods on kwok nodes, then SCALE_CHURN (default 1h)
## of churn with the controller's memory sampled and its /metrics scraped
## every SCALE_SCRAPE_INTERVAL (default 30s, 0 for none); then the consolidation
## decision and repack search over 1,000 and 2,000 nodes, and what a pod
## informer holds while it lists 10,000 pods again (TestRelistMemory). About
## 95 minutes; the figures go to SCALE_OUT (default .cache/scale) and the
## log, and docs/benchmarks.md §4 and §7 have them. SCALE_MEMORY_LIMIT=300Mi runs the
## controller as the chart would under that memory limit.
scale: setup
	go vet -tags scale ./test/scale/
	mkdir -p $(or $(SCALE_OUT),.cache/scale)
	SCALE_OUT=$(abspath $(or $(SCALE_OUT),.cache/scale)) JOINER_TEST_LOGS=$(abspath $(or $(SCALE_OUT),.cache/scale)) go test -tags scale -count=1 -timeout 150m -v -run '^TestControllerAtScale$$' ./test/scale/
	go test -run '^$$' -bench 'ConsolidationDecision|Repack' -benchtime 1x -count 3 ./pkg/disruption/ | tee $(or $(SCALE_OUT),.cache/scale)/consolidation.txt
	SCALE_OUT=$(abspath $(or $(SCALE_OUT),.cache/scale)) go test -tags scale -count=1 -timeout 30m -v -run '^TestRelistMemory$$' ./test/scale/

## scale-down: 1,000 pods scaled down to 200 against the real kube-scheduler
## (-tags scale), outside make test; about 11 minutes. The cluster must come
## within 1.15x the LP bound in 10 minutes, with bounded pod moves.
## docs/long-tests.md has its figures.
scale-down: setup
	go vet -tags scale ./test/consolidation/
	go test -tags scale -count=1 -timeout 30m -v -run '^TestMultiNodeScaleDown$$' ./test/consolidation/

## optimum: grade plans against the best integer plan, offline (hack/optimum):
## for each workload the plan beside the assignment LP bound, the
## configuration LP's certified bound and the best plan CBC (Debian's
## coinor-cbc, installed by setup) finds over the generated patterns in
## CBC_SECONDS (default 120) each; about 25 minutes. docs/benchmarks.md §2
## has the table.
optimum: setup
	go run ./hack/optimum -sec $(or $(CBC_SECONDS),120)

## optimum-random: the same grading of mixes the planner was not tuned on
## (hack/optimum/random.go: 4-30 Deployments, 1-3 pools, 1:1 to 1:16 GiB
## per CPU, 1,000-5,000 pods), MIXES of them (default 20) from SEED
## (default 1), with the median and 95th percentile of plan ÷ best
## integer; about 2.5 minutes a mix with CBC_SECONDS=30. docs/benchmarks.md
## §2 has the figures.
optimum-random: setup
	go run ./hack/optimum -random $(or $(MIXES),20) -seed $(or $(SEED),1) -sec $(or $(CBC_SECONDS),30)

## optimum-random-commitments: the random mixes under a commitment mix
## each (hack/optimum/commitments.go), graded on the bill against the best
## integer plan that also chooses what the commitments cover
## (hack/optimum/mipcommit.go); about 35 s a mix with CBC_SECONDS=30.
## docs/benchmarks.md §2c has the figures.
optimum-random-commitments: setup
	go run ./hack/optimum -random $(or $(MIXES),20) -seed $(or $(SEED),1) -sec $(or $(CBC_SECONDS),30) -commitments

## optimum-commitments: each held workload planned at list prices and with
## a commitment mix (hack/optimum/commitments.go), both priced on the bill
## under that mix, with the planning times; under a minute, no CBC.
## docs/benchmarks.md has the table.
optimum-commitments:
	go run ./hack/optimum -commitments

## reliability: issue 18's acceptance tried as a user would (-tags
## reliability): a capacity shortage without churn, a failed write after a
## launch, an instance terminated out of band, a dead kubelet repaired, the
## drain's groups and deadline, do-not-disrupt durations (RELIABILITY_DND,
## default 1m; 30m for the acceptance), an impaired instance replaced. About 15 minutes with the default.
## docs/reliability.md has its figures.
reliability: setup
	go vet -tags reliability ./test/aws/
	go test -tags reliability -count=1 -timeout 90m -v -run '^(TestCapacityShortageNoChurn|TestDoubleLaunchWhenTheWriteFails|TestInstanceTerminatedOutOfBand|TestKubeletDeathRepaired|TestDrainGroupsAndDeadline|TestDoNotDisruptDuration|TestInstanceStatusImpaired)$$' ./test/aws/

## fuzz: run each Go fuzz target for FUZZTIME (default 1m) in turn; make
## test runs only their seeds. docs/reliability.md has the findings.
FUZZ_TARGETS := \
	./api/v1/:FuzzNillableDuration \
	./pkg/disruption/:FuzzBudgetNodes \
	./pkg/disruption/:FuzzBudgetSchedule \
	./pkg/requirements/:FuzzRoundTrip \
	./pkg/cloudprovider/aws/interruption/:FuzzParse \
	./pkg/cloudprovider/aws/amifamily/:FuzzUserDataMerge \
	./pkg/cloudprovider/aws/amifamily/:FuzzParseAlias
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "fuzzing $${t#*:} in $${t%%:*} for $(or $(FUZZTIME),1m)"; \
	  go test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(or $(FUZZTIME),1m) "$${t%%:*}"; \
	done

## bench-aws: 1,000 pending pods become 200 EC2 instances through the aws
## provider and the local AWS endpoint with 50 ms per AWS call (-tags bench),
## outside make test; about 3 minutes a run (COUNT=3 for three).
## docs/benchmarks.md §6 has its figures.
bench-aws: setup
	go vet -tags bench ./test/aws/
	go test -tags bench -count=$(or $(COUNT),1) -timeout 60m -v -run '^TestBenchThousandPods$$' ./test/aws/

## least-privilege: take each Allow statement out of Joiner's stack in turn,
## run guide 03 under the rest (fake-aws --iam-enforce) and expect the
## controller to name a permission it granted (-tags leastprivilege); then
## Joiner's reservation, placement-group and role-check calls under its own
## stack enforced; then each action and resource ARN taken out in turn,
## evaluated against the runs' authorizations. Outside make test; about 12
## minutes. docs/install.md has its figures.
least-privilege: setup
	go vet -tags leastprivilege ./test/aws/
	go test -tags leastprivilege -count=1 -timeout 60m -v -run '^(TestEachStatementNamedWhenMissing|TestOwnFeaturesUnderOwnStack|TestEachActionAndResourceNeeded)$$' ./test/aws/

## karpenter-e2e: Karpenter v1.14.1's own regression suite
## (sigs.k8s.io/karpenter test/suites/regression, 99 specs), built unchanged
## from the module proxy (test/karpenter-e2e/suite pins it) and run against
## Joiner's kwok provider on the local control plane (hack/karpenter-e2e),
## with the NodeRepair, StaticCapacity and CapacityBuffer gates, as
## Karpenter's own e2e run turns them on. About 66 minutes on 2 cores,
## core beside the other two groups (docs/long-tests.md); the per-spec
## results go to docs/karpenter-e2e.md. E2E_ARGS passes flags (-focus
## REGEX, -groups core,pinned,buffers, -parallel=false, -out FILE).
karpenter-e2e: setup
	go run ./hack/karpenter-e2e $(E2E_ARGS)

## image: build Joiner's multi-arch (linux/amd64, linux/arm64) OCI image into
## the OCI layout bin/image, with no Docker daemon or registry (internal/image),
## then check it (-tags image): entrypoint, non-root user, both architectures,
## the binary taken out of it runs, and the layout publishes as documented
## (crane push --index and skopeo copy --all into a registry, pulled back by
## its tag, run), and the chart runs it (test/install TestChartRunsTheImage:
## helm install --wait with the image pushed to a registry, its binary pulled
## back and run with the Deployment's environment). Cross-compiling for two
## architectures takes minutes cold, so it is its own target. VERSION sets
## the release and the tag.
image: setup
	go run ./hack/image -out bin/image -version $(or $(VERSION),dev)
	go vet -tags image ./internal/image/ ./test/install/
	go test -tags image -count=1 -v -run '^(TestImage|TestPublish)$$' ./internal/image/
	go test -tags image -count=1 -v -run '^TestChartRunsTheImage$$' ./test/install/

## setup: install etcd and build the control-plane binaries (cached in .cache)
setup:
	JOINER_SETUP_VERBOSE=1 ./hack/setup.sh >/dev/null

## generate: regenerate deepcopy functions and CRDs
generate:
	go run ./hack/crdgen

## verify-generated: fail if generated files are stale
verify-generated:
	go run ./hack/crdgen -verify

## down: stop the demo's control plane, its local AWS endpoint and Joiner
down:
	go run ./hack/cluster down
