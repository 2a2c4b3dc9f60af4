package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/capacityreservation"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/subnet"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// The interfaces AWSController resolves through; the providers in
// pkg/cloudprovider/aws implement them.
type (
	// SubnetLister is subnet.Provider.
	SubnetLister interface {
		List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]ec2types.Subnet, error)
	}
	// SecurityGroupLister is securitygroup.Provider.
	SecurityGroupLister interface {
		List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.SecurityGroup, error)
	}
	// AMIResolver is amifamily.Resolver: the class's AMIs for a Kubernetes
	// minor version ("1.33"), newest first.
	AMIResolver interface {
		Resolve(ctx context.Context, nc *awsv1.EC2NodeClass, k8sVersion string) ([]awsv1.AMI, error)
	}
	// InstanceProfiles is instanceprofile.Provider.
	InstanceProfiles interface {
		Ensure(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error)
		Delete(ctx context.Context, nc *awsv1.EC2NodeClass) error
	}
	// LaunchTemplateDeleter is launchtemplate.Provider: it removes every
	// launch template made for the class.
	LaunchTemplateDeleter interface {
		DeleteForNodeClass(ctx context.Context, name string) error
	}
)

// Validator checks a class once its subnets, security groups, AMIs and
// instance profile are resolved (they are in its status). An error sets
// ValidationSucceeded False with the error's text; its reason is the
// error's Reason() when it has one, else "ValidationFailed". This is where
// checks such as the class's user data parsing plug in.
type Validator func(ctx context.Context, nc *awsv1.EC2NodeClass) error

// Requeue periods. Resolution is repeated every ResyncPeriod so status
// follows AWS (a new subnet, a new AMI behind an alias); a class that is
// not ready for a reason the user fixes in AWS (a missing tag, a missing
// role) is looked at again after NotReadyPeriod. AWS errors back off
// through the work queue, from one second up to ResyncPeriod.
const (
	ResyncPeriod   = 5 * time.Minute
	NotReadyPeriod = time.Minute
)

// Condition reasons of our own (Karpenter's where it has one).
const (
	ReasonAMINotFound              = "AMINotFound"
	ReasonDependenciesNotReady     = "DependenciesNotReady"
	ReasonValidationFailed         = "ValidationFailed"
	ReasonKubernetesVersion        = "KubernetesVersionUnknown"
	ReasonWaitingOnNodeClaims      = "WaitingOnNodeClaimTermination"
	messageAMINotFound             = "AMISelector did not match any AMIs"
	messageDependenciesNotReady    = "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution"
	maxNodeClaimsNamedInTheMessage = 5
)

// AWSController keeps EC2NodeClass status for the aws provider: it
// resolves subnets, security groups, AMIs and the instance profile, writes
// them and their conditions to status, and on deletion waits for the
// class's NodeClaims to go, then removes the instance profile and launch
// templates made for it before it lets the class go.
type AWSController struct {
	Client   client.Client
	Clock    clock.Clock
	Recorder record.EventRecorder

	Subnets          SubnetLister
	SecurityGroups   SecurityGroupLister
	AMIs             AMIResolver
	InstanceProfiles InstanceProfiles
	LaunchTemplates  LaunchTemplateDeleter
	// PlacementGroups resolves placementGroupSelector; nil marks every
	// class's PlacementGroupReady True, as for a class that selects none.
	PlacementGroups PlacementGroupResolver
	// CapacityReservations resolves capacityReservationSelectorTerms into
	// status; nil marks CapacityReservationsReady True and lists none.
	CapacityReservations CapacityReservationLister
	// KubernetesVersion is the cluster's "major.minor" (e.g. "1.33"), which
	// alias AMIs are chosen for; KubernetesVersion(discovery) builds it.
	KubernetesVersion func(ctx context.Context) (string, error)
	// Validators run in order; the first error fails ValidationSucceeded.
	Validators []Validator
	// Resync is how often a class is resolved again (SUBNET_REFRESH_INTERVAL,
	// whose name is Karpenter's: subnets' free IPs change the most);
	// ResyncPeriod when zero.
	Resync time.Duration
	// AMIWatch, when set, re-resolves a class as soon as AWS releases a new
	// image behind its @latest alias, instead of at the next resync. Its
	// Client, KubernetesVersion and Clock default to the controller's.
	AMIWatch *AMIWatch
}

// Register adds the controller to the manager. It reconciles a class when
// it is created, its spec changes or it is being deleted, when a NodeClaim
// goes (a deleted class may be waiting for it), when the AMI watch sees a
// new image behind its alias, and every ResyncPeriod.
func (c *AWSController) Register(mgr ctrl.Manager) error {
	if c.Subnets == nil || c.SecurityGroups == nil || c.AMIs == nil || c.InstanceProfiles == nil || c.LaunchTemplates == nil || c.KubernetesVersion == nil {
		return errors.New("nodeclass.aws: every provider and KubernetesVersion must be set")
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("nodeclass.aws")
	if w := c.AMIWatch; w != nil {
		if w.SSM == nil {
			return errors.New("nodeclass.aws: the AMI watch needs an SSM client")
		}
		if w.Client == nil {
			w.Client = mgr.GetClient()
		}
		if w.KubernetesVersion == nil {
			w.KubernetesVersion = c.KubernetesVersion
		}
		if w.Clock == nil {
			w.Clock = clock.RealClock{}
			if withTicker, ok := c.Clock.(clock.WithTicker); ok {
				w.Clock = withTicker
			}
		}
		if err := mgr.Add(w); err != nil {
			return err
		}
		b = b.WatchesRawSource(source.Channel(w.eventsChan(), &handler.EnqueueRequestForObject{}))
	}
	return b.
		For(&awsv1.EC2NodeClass{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				(e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
		}})).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name := classOf(o.(*v1.NodeClaim)); name != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
			}
			return nil
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		WithOptions(controller.Options{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, ResyncPeriod)}).
		Complete(c)
}

// classOf is the EC2NodeClass a NodeClaim uses, or "".
func classOf(nc *v1.NodeClaim) string {
	ref := nc.Spec.NodeClassRef
	if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return ""
	}
	return ref.Name
}

// Reconcile implements reconcile.Reconciler.
func (c *AWSController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &awsv1.EC2NodeClass{}
	if err := c.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		return c.finalize(ctx, nc)
	}
	if err := stampMetadata(ctx, c.Client, nc, true); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := nc.DeepCopy()
	r := &resolution{nc: nc, now: c.Clock.Now()}

	if subnets, err := c.Subnets.List(ctx, nc); err != nil {
		r.failed(awsv1.ConditionTypeSubnetsReady, err, func() { nc.Status.Subnets = nil })
	} else {
		nc.Status.Subnets = subnet.ToStatus(subnets)
		r.ready(awsv1.ConditionTypeSubnetsReady)
	}

	if groups, err := c.SecurityGroups.List(ctx, nc); err != nil {
		r.failed(awsv1.ConditionTypeSecurityGroupsReady, err, func() { nc.Status.SecurityGroups = nil })
	} else {
		nc.Status.SecurityGroups = groups
		r.ready(awsv1.ConditionTypeSecurityGroupsReady)
	}

	c.resolveAMIs(ctx, r)

	if name, err := c.InstanceProfiles.Ensure(ctx, nc); err != nil {
		r.failed(awsv1.ConditionTypeInstanceProfileReady, err, nil)
	} else {
		nc.Status.InstanceProfile = name
		r.ready(awsv1.ConditionTypeInstanceProfileReady)
	}

	c.resolvePlacementGroup(ctx, r)
	c.resolveCapacityReservations(ctx, r)
	c.validate(ctx, r)
	setReady(nc, r.now)
	if err := patchStatus(ctx, c.Client, stored, nc); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if len(r.errs) > 0 {
		return reconcile.Result{}, errors.Join(r.errs...)
	}
	if r.userFixable {
		return reconcile.Result{RequeueAfter: NotReadyPeriod}, nil
	}
	resync := ResyncPeriod
	if c.Resync > 0 {
		resync = c.Resync
	}
	return reconcile.Result{RequeueAfter: reservationsRequeue(nc, r.now, resync)}, nil
}

// ReservationPeriod is how often a class with capacityReservationSelectorTerms
// reads its reservations again, as Karpenter does: a reservation made,
// filled or cancelled shows within a minute.
const ReservationPeriod = time.Minute

// reservationsRequeue is when the class is to be read again: resync, or
// sooner for one with reservation terms (every ReservationPeriod, and when
// the next of its reservations starts expiring), so that launches stop
// going to a reservation that is closing.
func reservationsRequeue(nc *awsv1.EC2NodeClass, now time.Time, resync time.Duration) time.Duration {
	if len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
		return resync
	}
	next := min(resync, ReservationPeriod)
	for _, cr := range nc.Status.CapacityReservations {
		if cr.EndTime == nil || capacityreservation.Expiring(cr, now) {
			continue
		}
		at := cr.EndTime.Time
		if cr.ReservationType == "capacity-block" {
			at = at.Add(-capacityreservation.ExpirationPeriod)
		}
		if d := at.Sub(now); d > 0 && d < next {
			next = d
		}
	}
	return next
}

func (c *AWSController) resolveAMIs(ctx context.Context, r *resolution) {
	version, err := c.KubernetesVersion(ctx)
	if err != nil {
		setCondition(r.nc, awsv1.ConditionTypeAMIsReady, metav1.ConditionFalse, ReasonKubernetesVersion,
			fmt.Sprintf("finding the cluster's Kubernetes version, which alias AMIs are chosen for: %v", err), r.now)
		r.errs = append(r.errs, err)
		return
	}
	amis, err := c.AMIs.Resolve(ctx, r.nc, version)
	switch {
	case err != nil:
		r.failed(awsv1.ConditionTypeAMIsReady, err, func() { r.nc.Status.AMIs = nil })
	case len(amis) == 0:
		r.nc.Status.AMIs = nil
		setCondition(r.nc, awsv1.ConditionTypeAMIsReady, metav1.ConditionFalse, ReasonAMINotFound, messageAMINotFound, r.now)
		r.userFixable = true
	default:
		r.nc.Status.AMIs = amis
		r.ready(awsv1.ConditionTypeAMIsReady)
	}
}

// validate sets ValidationSucceeded: DependenciesNotReady until the four
// resolutions are True, then the Validators' verdict.
func (c *AWSController) validate(ctx context.Context, r *resolution) {
	status := metav1.ConditionTrue
	for _, t := range []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeSecurityGroupsReady, awsv1.ConditionTypeSubnetsReady} {
		switch cond := findCondition(r.nc.Status.Conditions, t); {
		case cond == nil || cond.Status == metav1.ConditionUnknown:
			if status == metav1.ConditionTrue {
				status = metav1.ConditionUnknown
			}
		case cond.Status == metav1.ConditionFalse:
			status = metav1.ConditionFalse
		}
	}
	if status != metav1.ConditionTrue {
		setCondition(r.nc, awsv1.ConditionTypeValidationSucceeded, status, ReasonDependenciesNotReady, messageDependenciesNotReady, r.now)
		return
	}
	for _, v := range c.Validators {
		if err := v(ctx, r.nc); err != nil {
			reason := ReasonValidationFailed
			var rs reasoner
			if errors.As(err, &rs) {
				reason = rs.Reason()
			} else if code := apiErrorCode(err); code != "" {
				// An AWS error is no verdict on the class: try again.
				err = awsclient.ExplainPermission(err)
				r.errs = append(r.errs, err)
				reason = code
			}
			setCondition(r.nc, awsv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, reason, err.Error(), r.now)
			r.userFixable = true
			return
		}
	}
	r.ready(awsv1.ConditionTypeValidationSucceeded)
}

// resolution collects one reconcile's outcome.
type resolution struct {
	nc  *awsv1.EC2NodeClass
	now time.Time
	// errs are errors worth retrying with backoff (AWS errors).
	errs []error
	// userFixable: something the user must fix (a selector matching
	// nothing, a missing role) keeps the class from Ready.
	userFixable bool
}

// reasoner is an error that names its condition reason, as
// selector.NoMatchError and instanceprofile.NotFoundError do.
type reasoner interface{ Reason() string }

func (r *resolution) ready(t string) {
	setCondition(r.nc, t, metav1.ConditionTrue, t, "", r.now)
}

// failed records err on condition t. An error that names its reason is the
// user's to fix (a selector that matched nothing, a missing role): the
// condition goes False with the error's text, and clear, if given, empties
// the status field, which would otherwise show what no longer resolves.
// Any other error (an
// AWS error such as AccessDenied, or throttling past the SDK's retries) is
// retried with backoff; its text goes in the condition too, a refused call
// naming the permission to grant first, except that a transient one
// (throttling, 5xx) leaves a True condition as it is rather than flap the
// class's readiness.
func (r *resolution) failed(t string, err error, clear func()) {
	var rs reasoner
	if errors.As(err, &rs) {
		setCondition(r.nc, t, metav1.ConditionFalse, rs.Reason(), err.Error(), r.now)
		if clear != nil {
			clear()
		}
		r.userFixable = true
		return
	}
	err = awsclient.ExplainPermission(err)
	r.errs = append(r.errs, err)
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		if cond := findCondition(r.nc.Status.Conditions, t); cond != nil && cond.Status == metav1.ConditionTrue {
			return
		}
	}
	reason := apiErrorCode(err)
	if reason == "" {
		reason = "ResolutionFailed"
	}
	setCondition(r.nc, t, metav1.ConditionFalse, reason, err.Error(), r.now)
}

var notReasonChars = regexp.MustCompile(`[^A-Za-z0-9_]`)

// apiErrorCode is the AWS error code of err as a condition reason
// ("InvalidSubnetID.NotFound" becomes "InvalidSubnetIDNotFound"), or "".
func apiErrorCode(err error) string {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return ""
	}
	code := notReasonChars.ReplaceAllString(apiErr.ErrorCode(), "")
	if code == "" || !(code[0] >= 'A' && code[0] <= 'Z' || code[0] >= 'a' && code[0] <= 'z') {
		return "AWSError"
	}
	return code
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// finalize lets a deleted class go once no NodeClaim uses it and the
// instance profile and launch templates made for it are removed, in that
// order: nodes still running need the profile.
func (c *AWSController) finalize(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, awsv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	var claims v1.NodeClaimList
	if err := c.Client.List(ctx, &claims); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the NodeClaims that use EC2NodeClass %q: %w", nc.Name, err)
	}
	var using []string
	for i := range claims.Items {
		if classOf(&claims.Items[i]) == nc.Name {
			using = append(using, claims.Items[i].Name)
		}
	}
	if len(using) > 0 {
		sort.Strings(using)
		waiting := "Waiting on NodeClaim termination for " + prettyList(using, maxNodeClaimsNamedInTheMessage)
		c.Recorder.Event(nc, corev1.EventTypeNormal, ReasonWaitingOnNodeClaims, waiting)
		stored := nc.DeepCopy()
		_, _, terminating := nc.Readiness()
		setCondition(nc, awsv1.ConditionTypeReady, metav1.ConditionFalse, awsv1.ReasonNodeClassTerminating, terminating+"; "+waiting, c.Clock.Now())
		if err := patchStatus(ctx, c.Client, stored, nc); err != nil && !apierrors.IsConflict(err) {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		// NodeClaim deletions requeue the class; this is the fallback.
		return reconcile.Result{RequeueAfter: NotReadyPeriod}, nil
	}
	if err := c.InstanceProfiles.Delete(ctx, nc); err != nil {
		c.Recorder.Event(nc, corev1.EventTypeWarning, "InstanceProfileDeletionFailed", awsclient.ExplainPermission(err).Error())
		return reconcile.Result{}, fmt.Errorf("deleting the instance profile of EC2NodeClass %q: %w", nc.Name, err)
	}
	if err := c.LaunchTemplates.DeleteForNodeClass(ctx, nc.Name); err != nil {
		c.Recorder.Event(nc, corev1.EventTypeWarning, "LaunchTemplateDeletionFailed", awsclient.ExplainPermission(err).Error())
		return reconcile.Result{}, fmt.Errorf("deleting the launch templates of EC2NodeClass %q: %w", nc.Name, err)
	}
	stored := nc.DeepCopy()
	controllerutil.RemoveFinalizer(nc, awsv1.TerminationFinalizer)
	if err := c.Client.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, nil
}

// prettyList names up to max items, then counts the rest.
func prettyList(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:max], ", ") + " and " + strconv.Itoa(len(items)-max) + " other(s)"
}

// KubernetesVersion returns the func AWSController.KubernetesVersion
// wants: the API server's "major.minor" through discovery. EKS reports a
// minor such as "33+"; anything past the digits is dropped.
func KubernetesVersion(d discovery.ServerVersionInterface) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		info, err := d.ServerVersion()
		if err != nil {
			return "", fmt.Errorf("asking the API server for its version: %w", err)
		}
		major, minor := leadingDigits(info.Major), leadingDigits(info.Minor)
		if major == "" || minor == "" {
			return "", fmt.Errorf("the API server reports version %q.%q, not a major.minor", info.Major, info.Minor)
		}
		return major + "." + minor, nil
	}
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// PlacementGroupResolver resolves a class's placement group; nil, nil
// when the class selects none.
type PlacementGroupResolver interface {
	Get(ctx context.Context, nc *awsv1.EC2NodeClass) (*placementgroup.Group, error)
}

// resolvePlacementGroup sets PlacementGroupReady. The group is not kept in
// status (Karpenter's v1 status has no field for it); launches resolve it
// again through the same cache.
func (c *AWSController) resolvePlacementGroup(ctx context.Context, r *resolution) {
	if c.PlacementGroups == nil {
		r.ready(awsv1.ConditionTypePlacementGroupReady)
		return
	}
	pg, err := c.PlacementGroups.Get(ctx, r.nc)
	if err != nil {
		r.failed(awsv1.ConditionTypePlacementGroupReady, err, nil)
		return
	}
	if pg != nil && findCondition(r.nc.Status.Conditions, awsv1.ConditionTypePlacementGroupReady) == nil {
		log.FromContext(ctx).Info("discovered placement group", "id", pg.ID, "name", pg.Name, "strategy", pg.Strategy)
	}
	r.ready(awsv1.ConditionTypePlacementGroupReady)
}

// CapacityReservationLister resolves a class's reservations.
type CapacityReservationLister interface {
	List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.CapacityReservation, error)
}

// resolveCapacityReservations writes status.capacityReservations and
// CapacityReservationsReady. Terms that select nothing leave the class
// Ready with none, as in Karpenter: its pools still launch on-demand and
// spot. With the ReservedCapacity gate off (no lister) the terms are
// ignored, and the class Ready.
func (c *AWSController) resolveCapacityReservations(ctx context.Context, r *resolution) {
	if c.CapacityReservations == nil {
		r.nc.Status.CapacityReservations = nil
		r.ready(awsv1.ConditionTypeCapacityReservationsReady)
		return
	}
	crs, err := c.CapacityReservations.List(ctx, r.nc)
	if err != nil {
		r.failed(awsv1.ConditionTypeCapacityReservationsReady, err, func() { r.nc.Status.CapacityReservations = nil })
		return
	}
	r.nc.Status.CapacityReservations = crs
	r.ready(awsv1.ConditionTypeCapacityReservationsReady)
}
