//! A cgroup as a workload at the level a user chooses (`--by pod`,
//! `container`, `unit`, `cgroup`): the name it is shown and rolled up
//! under. Cgroups that share a name at a level add up there (two cgroups
//! of one container, the containers of one pod, the scopes of one unit).

use super::{names::ContainerNames, path::PathLabels};

/// What cgroups are rolled up to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Level {
    /// The cgroup itself, by its path.
    #[default]
    Cgroup,
    /// Its container: `namespace/pod/container` when the runtime's files
    /// name it, else the runtime and the ID's first 12 digits.
    Container,
    /// Its Kubernetes pod: `namespace/pod`, else `pod <uid>`.
    Pod,
    /// Its systemd unit (a container's scope is a unit too).
    Unit,
}

impl Level {
    /// As `--by` and the JSON `by` field spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Cgroup => "cgroup",
            Level::Container => "container",
            Level::Pod => "pod",
            Level::Unit => "unit",
        }
    }
}

/// The part of `path` up to the last component with `id` in it (a pod's
/// UID also as systemd spells it, `_` for `-`): the container's or pod's
/// own cgroup.
fn own_cgroup<'a>(path: &'a str, id: &str) -> Option<&'a str> {
    let systemd = id.replace('-', "_");
    let mut end = None;
    let mut at = 0;
    for part in path.split('/') {
        at += part.len();
        if part.contains(id) || part.contains(&systemd) {
            end = Some(at);
        }
        at += 1;
    }
    end.map(|end| &path[..end])
}

/// A cgroup with what is known of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    /// Its path, relative to its hierarchy's root.
    pub path: String,
    pub labels: PathLabels,
    /// What its runtime's files say, when it is a container they name.
    pub names: Option<ContainerNames>,
}

impl Workload {
    /// Its name at `level`; its path when it has nothing to be named by
    /// there (a system service at the pod level is its own cgroup).
    pub fn name_at(&self, level: Level) -> String {
        let names = self.names.as_ref();
        let named = match level {
            Level::Cgroup => None,
            Level::Container => self.container_name(),
            Level::Pod => match (
                names.and_then(|n| n.namespace.as_deref()),
                names.and_then(|n| n.pod.as_deref()),
            ) {
                (Some(ns), Some(pod)) => Some(format!("{ns}/{pod}")),
                (None, Some(pod)) => Some(pod.to_string()),
                _ => self.labels.pod_uid.as_ref().map(|u| format!("pod {u}")),
            },
            Level::Unit => self.labels.unit.clone(),
        };
        named.unwrap_or_else(|| self.path.clone())
    }

    /// What it adds up under at `level` (`--by`): the container's ID, the
    /// pod's UID (each in its own cgroup), the unit's cgroup, else the name its runtime gives it
    /// there; None when it is none of these (it stays itself). An
    /// identity, not a name: a container whose runtime's files could not
    /// be read still adds up with the other containers of its pod, and two
    /// pods or containers that share a name (a pod's namesake in another
    /// namespace, a container and its restart under a new ID) do not. A
    /// unit is its cgroup, not its name: `app.service` of the system and
    /// of a user's manager (`user@1000.service/app.slice/app.service`)
    /// are two units.
    pub fn identity_at(&self, level: Level) -> Option<String> {
        let labels = &self.labels;
        let id = match level {
            Level::Cgroup => return None,
            Level::Container => labels.container_id.clone(),
            Level::Pod => labels.pod_uid.clone(),
            Level::Unit => self.unit_cgroup().map(str::to_string),
        };
        // An ID in a cgroup's name is anyone's to choose who may make
        // cgroups (a user's manager, a delegated service, a nested node):
        // a container or pod is its ID where it is, its own cgroup, so
        // one named like another elsewhere never adds up with it. Its
        // cgroups below (crun's `container`) and a pod's containers do.
        let id = match level {
            Level::Container | Level::Pod => id.map(|id| match own_cgroup(&self.path, &id) {
                Some(own) => format!("{id} in {own}"),
                None => id,
            }),
            _ => id,
        };
        let name = || Some(self.name_at(level)).filter(|n| *n != self.path);
        Some(format!("{} {}", level.as_str(), id.or_else(name)?))
    }

    /// What tells it apart at `level` from another workload shown by the
    /// same name: the container ID's first 12 digits (as `docker ps`
    /// shows it), the pod's UID, the unit's cgroup, else its path.
    pub fn distinct_at(&self, level: Level) -> String {
        let labels = &self.labels;
        let found = match level {
            Level::Cgroup => None,
            Level::Container => (labels.container_id.as_deref()).map(|id| id[..12].to_string()),
            Level::Pod => labels.pod_uid.clone(),
            Level::Unit => self.unit_cgroup().map(str::to_string),
        };
        found.unwrap_or_else(|| self.path.clone())
    }

    /// The cgroup of its unit: its path down to the unit's own component
    /// (the innermost unit's, as the label is), which the unit's
    /// sub-cgroups share.
    fn unit_cgroup(&self) -> Option<&str> {
        let unit = self.labels.unit.as_deref()?;
        let at = self.path.rmatch_indices(unit).find(|&(i, _)| {
            let end = i + unit.len();
            self.path[..i].ends_with('/')
                && (end == self.path.len() || self.path[end..].starts_with('/'))
        })?;
        Some(&self.path[..at.0 + unit.len()])
    }

    /// What its owner calls it, and what that is: `("container",
    /// "shop/web-1/nginx")` (or the runtime and ID's first 12 digits
    /// without the runtime's files), `("pod", ...)` for a pod's own
    /// cgroup, `("unit", "nginx.service")`, else `("cgroup", path)`.
    pub fn owner_name(&self) -> (&'static str, String) {
        if let Some(container) = self.container_name() {
            return ("container", container);
        }
        if self.labels.pod_uid.is_some() {
            return ("pod", self.name_at(Level::Pod));
        }
        match &self.labels.unit {
            Some(unit) => ("unit", unit.clone()),
            None => ("cgroup", self.path.clone()),
        }
    }

    fn container_name(&self) -> Option<String> {
        let id = self.labels.container_id.as_deref()?;
        let names = self.names.as_ref();
        let field = |f: fn(&ContainerNames) -> &Option<String>| names.and_then(|n| f(n).as_deref());
        let short = &id[..12];
        Some(
            match (
                field(|n| &n.namespace),
                field(|n| &n.pod),
                field(|n| &n.container),
            ) {
                (Some(ns), Some(pod), Some(c)) => format!("{ns}/{pod}/{c}"),
                (Some(ns), Some(pod), None) if names.is_some_and(|n| n.sandbox) => {
                    format!("{ns}/{pod}/(sandbox)")
                }
                (_, _, Some(c)) => c.to_string(),
                _ => match self.labels.runtime {
                    Some(r) => format!("{} {short}", r.as_str()),
                    None => format!("container {short}"),
                },
            },
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sys::workload::{
        names::NameSource,
        path::{self, Runtime},
    };

    /// A container ID and a pod UID (systemd's spelling) of the fixtures.
    pub(crate) const ID: &str = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9";
    pub(crate) const UID_: &str = "3f1c2d4e_5b6a_7c8d_9e0f_123456789abc";

    /// The cgroup `path` with the runtime's `names`.
    pub(crate) fn workload(path: &str, names: Option<ContainerNames>) -> Workload {
        Workload {
            path: path.into(),
            labels: path::parse(path),
            names,
        }
    }

    #[test]
    fn each_level_names_what_it_can_and_falls_back_to_the_path() {
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope"
        );
        let names = ContainerNames {
            container: Some("nginx".into()),
            pod: Some("web-1".into()),
            namespace: Some("shop".into()),
            source: Some(NameSource::ContainerdBundle),
            ..ContainerNames::default()
        };
        let named = workload(&path, Some(names));
        assert_eq!(named.name_at(Level::Container), "shop/web-1/nginx");
        assert_eq!(named.name_at(Level::Pod), "shop/web-1");
        assert_eq!(
            named.name_at(Level::Unit),
            format!("cri-containerd-{ID}.scope")
        );
        assert_eq!(named.name_at(Level::Cgroup), path);
        // Without the runtime's files: what the path says.
        let bare = workload(&path, None);
        assert_eq!(bare.name_at(Level::Container), "containerd 9a8b7c6d5e4f");
        assert_eq!(
            bare.name_at(Level::Pod),
            "pod 3f1c2d4e-5b6a-7c8d-9e0f-123456789abc"
        );
        // A service has no container or pod: it stays its own cgroup.
        let svc = workload("/system.slice/nginx.service", None);
        assert_eq!(svc.name_at(Level::Container), "/system.slice/nginx.service");
        assert_eq!(svc.name_at(Level::Pod), "/system.slice/nginx.service");
        assert_eq!(svc.name_at(Level::Unit), "nginx.service");
        let podman = workload(
            &format!("/libpod_parent/libpod-{ID}"),
            Some(ContainerNames {
                container: Some("sleeper".into()),
                ..ContainerNames::default()
            }),
        );
        assert_eq!(podman.name_at(Level::Container), "sleeper");
        assert_eq!(podman.labels.runtime, Some(Runtime::Podman));
    }

    #[test]
    fn cgroups_add_up_by_identity_whatever_names_are_known() {
        let pod =
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice");
        let named = ContainerNames {
            pod: Some("web-1".into()),
            namespace: Some("shop".into()),
            ..ContainerNames::default()
        };
        let app = workload(&format!("{pod}/cri-containerd-{ID}.scope"), Some(named));
        let sidecar = workload(&format!("{pod}/cri-containerd-{}0.scope", &ID[1..]), None);
        assert_eq!(app.identity_at(Level::Pod), sidecar.identity_at(Level::Pod));
        assert_ne!(
            app.identity_at(Level::Container),
            sidecar.identity_at(Level::Container)
        );
        let svc = workload("/system.slice/nginx.service", None);
        assert_eq!(
            svc.identity_at(Level::Unit).unwrap(),
            "unit /system.slice/nginx.service"
        );
        assert_eq!(svc.identity_at(Level::Pod), None);
    }

    /// Issue 48 item 5: a cgroup a user made under their own manager with
    /// another container's ID (or pod UID) in its name took that
    /// container's identity under `--by container`, and its names. It is
    /// that user's now: another identity, and no names unless given.
    #[test]
    fn a_users_cgroup_never_adds_up_with_a_system_container() {
        let system = workload(&format!("/system.slice/docker-{ID}.scope"), None);
        let user = "/user.slice/user-65534.slice/user@65534.service/app.slice";
        let fake = workload(&format!("{user}/docker-{ID}.scope"), None);
        assert_ne!(
            system.identity_at(Level::Container),
            fake.identity_at(Level::Container)
        );
        assert_eq!(
            fake.identity_at(Level::Container).unwrap(),
            format!("container {ID} in {user}/docker-{ID}.scope")
        );
        let pod = format!("kubepods-besteffort-pod{UID_}.slice");
        let real_pod = workload(
            &format!("/kubepods.slice/kubepods-besteffort.slice/{pod}"),
            None,
        );
        let fake_pod = workload(&format!("{user}/{pod}"), None);
        assert_ne!(
            real_pod.identity_at(Level::Pod),
            fake_pod.identity_at(Level::Pod)
        );
    }

    /// Issue 48 item 5: outside a user's manager too, anyone who may make
    /// cgroups (a service with a delegated subtree, a nested node) could
    /// name one `docker-<another's ID>.scope` or `kubepods-...-pod<UID>.slice`
    /// and add up with that container or pod under `--by`. A container or
    /// pod is its ID in its own cgroup now; its cgroups below still add up.
    #[test]
    fn a_container_named_like_another_elsewhere_never_adds_up_with_it() {
        let real = workload(&format!("/system.slice/docker-{ID}.scope"), None);
        let below = workload(&format!("/system.slice/docker-{ID}.scope/container"), None);
        let svc = "/system.slice/delegated.service";
        let fake = workload(&format!("{svc}/docker-{ID}.scope"), None);
        assert_eq!(
            real.identity_at(Level::Container),
            below.identity_at(Level::Container)
        );
        assert_ne!(
            real.identity_at(Level::Container),
            fake.identity_at(Level::Container)
        );
        let pod = format!("kubepods-besteffort-pod{UID_}.slice");
        let real_pod = format!("/kubepods.slice/kubepods-besteffort.slice/{pod}");
        let one = workload(&format!("{real_pod}/cri-containerd-{ID}.scope"), None);
        let two = workload(
            &format!("{real_pod}/cri-containerd-{}.scope", "e".repeat(64)),
            None,
        );
        let fake_pod = workload(&format!("{svc}/{pod}/cri-containerd-{ID}.scope"), None);
        assert_eq!(one.identity_at(Level::Pod), two.identity_at(Level::Pod));
        assert_ne!(
            one.identity_at(Level::Pod),
            fake_pod.identity_at(Level::Pod)
        );
    }

    /// Issue 25: workloads that share a name are not one workload: a pod's
    /// namesake in another namespace (another UID), a container restarted
    /// under a new ID, a user's unit named as a system one; a unit's
    /// sub-cgroup is its unit.
    #[test]
    fn namesakes_have_identities_of_their_own() {
        let pod = |uid: &str, ns: &str, id: &str| {
            let names = ContainerNames {
                namespace: Some(ns.into()),
                pod: Some("web-1".into()),
                container: Some("nginx".into()),
                ..ContainerNames::default()
            };
            let dir = format!(
                "/kubepods.slice/kubepods-pod{}.slice",
                uid.replace('-', "_")
            );
            workload(&format!("{dir}/cri-containerd-{id}.scope"), Some(names))
        };
        let other_uid = "0b1c2d3e-4f5a-4b7c-8d9e-0f1a2b3c4d5e";
        let shop = pod(&UID_.replace('_', "-"), "shop", ID);
        let test = pod(other_uid, "test", &ID.replace('9', "1"));
        assert_ne!(shop.identity_at(Level::Pod), test.identity_at(Level::Pod));
        assert_eq!(test.distinct_at(Level::Pod), other_uid);
        let restarted = pod(&UID_.replace('_', "-"), "shop", &ID.replace('a', "c"));
        assert_eq!(
            shop.name_at(Level::Container),
            restarted.name_at(Level::Container)
        );
        assert_ne!(
            shop.identity_at(Level::Container),
            restarted.identity_at(Level::Container)
        );
        assert_eq!(shop.distinct_at(Level::Container), &ID[..12]);
        assert_eq!(
            shop.identity_at(Level::Pod),
            restarted.identity_at(Level::Pod)
        );
        let system = workload("/system.slice/app.service", None);
        let user = workload(
            "/user.slice/user-1000.slice/user@1000.service/app.slice/app.service",
            None,
        );
        assert_eq!(system.name_at(Level::Unit), user.name_at(Level::Unit));
        assert_ne!(
            system.identity_at(Level::Unit),
            user.identity_at(Level::Unit)
        );
        let sub = workload("/system.slice/app.service/worker", None);
        assert_eq!(
            sub.identity_at(Level::Unit),
            system.identity_at(Level::Unit)
        );
        assert_eq!(sub.distinct_at(Level::Unit), "/system.slice/app.service");
        // The unit's name inside a later component's is not its cgroup.
        let odd = workload("/system.slice/app.service/xapp.service.d", None);
        assert_eq!(
            odd.identity_at(Level::Unit),
            system.identity_at(Level::Unit)
        );
    }

    #[test]
    fn the_owner_name_is_the_most_specific_one_known() {
        let pod =
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice");
        let container = format!("{pod}/cri-containerd-{ID}.scope");
        let names = ContainerNames {
            container: Some("nginx".into()),
            pod: Some("web-1".into()),
            namespace: Some("shop".into()),
            ..ContainerNames::default()
        };
        let owner = |path: &str, names| workload(path, names).owner_name();
        assert_eq!(
            owner(&container, Some(names)),
            ("container", "shop/web-1/nginx".into())
        );
        assert_eq!(
            owner(&container, None),
            ("container", "containerd 9a8b7c6d5e4f".into())
        );
        assert_eq!(
            owner(&pod, None),
            ("pod", "pod 3f1c2d4e-5b6a-7c8d-9e0f-123456789abc".into())
        );
        assert_eq!(
            owner("/system.slice/nginx.service", None),
            ("unit", "nginx.service".into())
        );
        assert_eq!(
            owner("/system.slice", None),
            ("cgroup", "/system.slice".into())
        );
        assert_eq!(owner("/batch/job1", None), ("cgroup", "/batch/job1".into()));
    }
}
